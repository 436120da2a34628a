use super::*;
use strata_tsdb::Value;

fn err(line: &str) -> String {
    match parse_put_line(line.as_bytes(), &ParseConfig::default()) {
        Ok(p) => panic!("expected an error for {line:?}, got {p:?}"),
        Err(e) => e.to_string(),
    }
}

fn ok(line: &str) -> PointRef<'_> {
    match parse_put_line(line.as_bytes(), &ParseConfig::default()) {
        Ok(p) => p,
        Err(e) => panic!("{line:?}: {e}"),
    }
}

#[test]
fn step1_not_enough_arguments() {
    assert_eq!(
        err("put"),
        "put: illegal argument: not enough arguments (need least 4, got 0)"
    );
    assert_eq!(
        err("put\r\n"),
        "put: illegal argument: not enough arguments (need least 4, got 0)"
    );
    assert_eq!(
        err("put "),
        "put: illegal argument: not enough arguments (need least 4, got 1)"
    );
    assert_eq!(
        err("put m 1 2"),
        "put: illegal argument: not enough arguments (need least 4, got 3)"
    );
    // Empty tokens count: five tokens, so this reaches the tag checks instead.
    assert_eq!(
        err("put m 1 2 "),
        "put: illegal argument: Need at least one tag (metric=m, tags={})"
    );
}

#[test]
fn step2_empty_metric() {
    assert_eq!(
        err("put  1 2 h=x"),
        "put: illegal argument: empty metric name"
    );
}

#[test]
fn step3_timestamp_not_a_number() {
    assert_eq!(
        err("put m notatime 1 h=x"),
        "put: invalid value: Invalid character 'n' in notatime"
    );
    assert_eq!(err("put m  1 h=x"), "put: invalid value: Empty string");
    assert_eq!(
        err("put m - 1 h=x"),
        "put: invalid value: Just a sign, no value: -"
    );
    assert_eq!(
        err("put m 99999999999999999999 1 h=x"),
        "put: invalid value: Value too long: 99999999999999999999"
    );
    assert_eq!(
        err("put m 9999999999999999999 1 h=x"),
        "put: invalid value: Overflow in 9999999999999999999"
    );
    // The timestamp is checked before the value and the tags.
    assert_eq!(
        err("put m x 1 bad"),
        "put: invalid value: Invalid character 'x' in x"
    );
}

#[test]
fn step4_non_positive_timestamp() {
    assert_eq!(
        err("put m 0 1 h=x"),
        "put: illegal argument: invalid timestamp: 0"
    );
    assert_eq!(
        err("put m -5 1 h=x"),
        "put: illegal argument: invalid timestamp: -5"
    );
    assert_eq!(
        err("put m 0.000 1 h=x"),
        "put: illegal argument: invalid timestamp: 0"
    );
}

#[test]
fn step5_empty_value() {
    assert_eq!(err("put m 1  h=x"), "put: illegal argument: empty value");
    // Before the tags are looked at.
    assert_eq!(err("put m 1  bad"), "put: illegal argument: empty value");
}

#[test]
fn step6_tags() {
    assert_eq!(
        err("put m 1 2 hx"),
        "put: illegal argument: invalid tag: hx"
    );
    assert_eq!(
        err("put m 1 2 a=b=c"),
        "put: illegal argument: invalid tag: a=b=c"
    );
    assert_eq!(
        err("put m 1 2 =b"),
        "put: illegal argument: invalid tag: =b"
    );
    assert_eq!(
        err("put m 1 2 a="),
        "put: illegal argument: invalid tag: a="
    );
    assert_eq!(
        err("put m 1 2 h=x ="),
        "put: illegal argument: invalid tag: ="
    );
    assert_eq!(
        err("put m 1 2 h=a dc=1 h=b"),
        "put: illegal argument: duplicate tag: h=b, tags={h=a, dc=1}"
    );
    // Re-stating the same pair is tolerated.
    let p = ok("put m 1 2 h=a h=a");
    assert_eq!(p.tags.as_slice(), &[("h", "a")]);
    // Tags are checked before the value.
    assert_eq!(
        err("put m 1 abc hx"),
        "put: illegal argument: invalid tag: hx"
    );
}

#[test]
fn step7_value() {
    assert_eq!(
        err("put m 1 abc h=x"),
        "put: invalid value: Invalid character 'a' in abc"
    );
    assert_eq!(
        err("put m 1 NaN h=x"),
        "put: invalid value: Invalid character 'N' in NaN"
    );
    assert_eq!(
        err("put m 1 1.2.3 h=x"),
        "put: invalid value: multiple points"
    );
    assert_eq!(
        err("put m 1 1.x h=x"),
        "put: invalid value: For input string: \"1.x\""
    );
    assert_eq!(
        err("put m 1 9223372036854775808 h=x"),
        "put: invalid value: Overflow in 9223372036854775808"
    );
    // The value is parsed before the storage-layer checks.
    assert_eq!(
        err("put m 1 abc"),
        "put: illegal argument: not enough arguments (need least 4, got 3)"
    );
    assert_eq!(
        err("put m 1 abc "),
        "put: invalid value: Invalid character 'a' in abc"
    );
}

#[test]
fn step8_storage_checks_in_order() {
    assert_eq!(
        err("put m 1 1e400 h=x"),
        "put: illegal argument: value is NaN or Infinite: Infinity for metric=m timestamp=1"
    );
    assert_eq!(
        err("put m 1 -1e400 h=x"),
        "put: illegal argument: value is NaN or Infinite: -Infinity for metric=m timestamp=1"
    );
    // NaN/Inf comes before the timestamp range and the tag count.
    assert_eq!(
        err("put m 10000000000000 1e400 "),
        "put: illegal argument: value is NaN or Infinite: Infinity for metric=m timestamp=10000000000000"
    );
    assert_eq!(
        err("put m 10000000000000 42 h=x"),
        "put: illegal argument: bad timestamp=10000000000000 when trying to add value=[42]/0 to \
         metric=m, tags={h=x}"
    );
    assert!(ok("put m 9999999999999 42 h=x").millis);
    assert_eq!(
        err("put m 1 2  "),
        "put: illegal argument: Need at least one tag (metric=m, tags={})"
    );
    assert_eq!(
        err("put m 1 2 a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8 i=9"),
        "put: illegal argument: Too many tags: 9 maximum allowed: 8, tags: {a=1, b=2, c=3, d=4, \
         e=5, f=6, g=7, h=8, i=9}"
    );
    let many: String = (0..20).map(|i| format!(" k{i}=v")).collect();
    let line = format!("put m 1 2{many}");
    assert!(
        err(&line).starts_with(
            "put: illegal argument: Too many tags: 20 maximum allowed: 8, tags: {k0=v,"
        )
    );
    // Tag count before characters.
    assert!(err("put m:x 1 2 a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8 i=9").contains("Too many tags"));
    assert_eq!(
        err("put m:x 1 2 h=x"),
        "put: illegal argument: Invalid metric name (\"m:x\"): illegal character: :"
    );
    // Metric before tags.
    assert!(err("put m:x 1 2 h*=x").contains("metric name"));
    assert_eq!(
        err("put m 1 2 h*=x"),
        "put: illegal argument: Invalid tag name with value [x] (\"h*\"): illegal character: *"
    );
    assert_eq!(
        err("put m 1 2 h=x|y"),
        "put: illegal argument: Invalid tag value with key [h] (\"x|y\"): illegal character: |"
    );
    assert_eq!(
        err("put m 1 2 h=\"x\""),
        "put: illegal argument: Invalid tag value with key [h] (\"\"x\"\"): illegal character: \""
    );
}

#[test]
fn max_tags_and_special_chars_are_configurable() {
    let cfg = ParseConfig::default()
        .with_max_tags(2)
        .with_allowed_special_chars(":");
    let e = parse_put_line(b"put m 1 2 a=1 b=2 c=3", &cfg).unwrap_err();
    assert_eq!(
        e.to_string(),
        "put: illegal argument: Too many tags: 3 maximum allowed: 2, tags: {a=1, b=2, c=3}"
    );
    assert!(parse_put_line(b"put m:x 1 2 a=1:2", &cfg).is_ok());
    let cfg = ParseConfig::default().with_max_tags(100);
    assert_eq!(cfg.max_tags(), MAX_INLINE_TAGS);
    let many: String = (0..16).map(|i| format!(" k{i}=v")).collect();
    let line = format!("put m 1 2{many}");
    assert_eq!(
        parse_put_line(line.as_bytes(), &cfg).unwrap().tags.len(),
        16
    );
}

#[test]
fn invalid_utf8_is_rejected() {
    let e = parse_put_line(b"put m\xff 1 2 h=x", &ParseConfig::default()).unwrap_err();
    assert_eq!(e, PutError::InvalidUtf8);
    assert_eq!(
        e.reply_line(),
        "put: illegal argument: the line is not valid UTF-8\n"
    );
}

#[test]
fn good_lines_round_trip() {
    let p = ok("put sys.cpu.user 1356998400 42.5 host=web01 cpu=0\r\n");
    assert_eq!(p.metric, "sys.cpu.user");
    assert_eq!(
        (p.timestamp, p.millis, p.ts_ms()),
        (1356998400, false, 1356998400000)
    );
    assert_eq!(p.value, Value::Float(42.5));
    assert_eq!(p.tags.as_slice(), &[("host", "web01"), ("cpu", "0")]);
    assert_eq!(p.tags.get("cpu"), Some("0"));

    // tcollector-style double and trailing spaces between tags.
    let p = ok("put m 1356998400 7  host=a   dc=b  \r\n");
    assert_eq!(
        (p.metric, p.timestamp, p.value),
        ("m", 1356998400, Value::Int(7))
    );
    assert_eq!(p.tags.as_slice(), &[("host", "a"), ("dc", "b")]);
    // A double space before the timestamp makes it empty, as in OpenTSDB.
    assert_eq!(
        err("put m  1356998400 7 host=a"),
        "put: invalid value: Empty string"
    );

    // Milliseconds by magnitude.
    let p = ok("put m 1356998400500 -3 host=a");
    assert_eq!(
        (p.timestamp, p.millis, p.ts_ms()),
        (1356998400500, true, 1356998400500)
    );
    assert_eq!(p.value, Value::Int(-3));
    let p = ok("put m 4294967296 1 host=a");
    assert!(p.millis);

    // Integer versus float by the text.
    assert_eq!(ok("put m 1 +5 h=a").value, Value::Int(5));
    assert_eq!(ok("put m 1 5e2 h=a").value, Value::Float(500.0));
    assert_eq!(ok("put m 1 .5 h=a").value, Value::Float(0.5));
}

#[test]
fn utf8_names_are_accepted() {
    let p = ok("put температура 1356998400 1 город=Москва 国=中国\n");
    assert_eq!(p.metric, "температура");
    assert_eq!(p.tags.as_slice(), &[("город", "Москва"), ("国", "中国")]);
    assert_eq!(
        err("put m 1 2 h=🙂"),
        "put: illegal argument: Invalid tag value with key [h] (\"🙂\"): illegal character: 🙂"
    );
}

#[test]
fn sec_frac_is_a_fraction_of_a_second() {
    // Strata exception #7: OpenTSDB would delete the dot.
    let p = ok("put m 1364410924.5 1 h=a");
    assert_eq!(
        (p.timestamp, p.millis, p.ts_ms()),
        (1364410924500, true, 1364410924500)
    );
    assert_eq!(ok("put m 1364410924.25 1 h=a").ts_ms(), 1364410924250);
    assert_eq!(ok("put m 1364410924.250 1 h=a").ts_ms(), 1364410924250);
    assert_eq!(ok("put m 1364410924.007 1 h=a").ts_ms(), 1364410924007);
    // Small seconds stay right even though the ms value is below the magnitude threshold.
    assert_eq!(ok("put m 5.5 1 h=a").ts_ms(), 5500);
    // A bare trailing dot is whole seconds.
    let p = ok("put m 1364410924. 1 h=a");
    assert_eq!((p.timestamp, p.millis), (1364410924, false));
    assert_eq!(
        err("put m 1364410924.2500 1 h=a"),
        "put: invalid value: Too many digits after the point in 1364410924.2500: at most 3 \
         (milliseconds) are allowed"
    );
    assert_eq!(
        err("put m 1364410924.5x 1 h=a"),
        "put: invalid value: Invalid character 'x' in 1364410924.5x"
    );
    assert_eq!(
        err("put m 1.2.3 1 h=a"),
        "put: invalid value: Invalid character '.' in 1.2.3"
    );
    assert_eq!(err("put m .5 1 h=a"), "put: invalid value: Empty string");
    assert_eq!(
        err("put m 1364410924000.5 1 h=a"),
        "put: invalid value: A fraction of a second needs a timestamp in seconds: 1364410924000.5"
    );
    assert_eq!(
        err("put m -1.5 1 h=a"),
        "put: illegal argument: invalid timestamp: -1500"
    );
}

#[test]
fn commands_dispatch() {
    assert_eq!(
        parse_command(b"put m 1 2 h=a\r\n"),
        Command::Put(b"put m 1 2 h=a")
    );
    assert_eq!(parse_command(b"put"), Command::Put(b"put"));
    assert_eq!(parse_command(b"version\n"), Command::Version);
    assert_eq!(parse_command(b"version extra"), Command::Version);
    assert_eq!(parse_command(b"stats"), Command::Stats);
    assert_eq!(parse_command(b"help"), Command::Help);
    assert_eq!(parse_command(b"dropcaches"), Command::DropCaches);
    assert_eq!(parse_command(b"exit\r\n"), Command::Exit);
    assert_eq!(parse_command(b"diediedie"), Command::DieDieDie);
    let unknown = parse_command(b"PUT m 1 2 h=a");
    assert_eq!(unknown, Command::Unknown(b"PUT"));
    assert_eq!(
        unknown.unknown_reply().unwrap(),
        "unknown command: PUT.  Try `help'.\n"
    );
    assert_eq!(
        parse_command(b"\r\n").unknown_reply().unwrap(),
        "unknown command: .  Try `help'.\n"
    );
    assert_eq!(
        parse_command(b" put").unknown_reply().unwrap(),
        "unknown command: .  Try `help'.\n"
    );
    assert_eq!(
        parse_command(b"rollup x").unknown_reply().unwrap(),
        "unknown command: rollup.  Try `help'.\n"
    );
    assert_eq!(Command::Exit.unknown_reply(), None);
}

#[test]
fn help_lists_commands_in_registration_order() {
    assert_eq!(
        help_reply(true, true),
        "available commands: stats dropcaches version exit help put diediedie \n"
    );
    assert_eq!(
        help_reply(false, true),
        "available commands: stats dropcaches version exit help put \n"
    );
    // A read-only server (OpenTSDB's `tsd.mode=ro`) does not register `put`.
    assert_eq!(
        help_reply(false, false),
        "available commands: stats dropcaches version exit help \n"
    );
}

/// Prints the telnet parse rate for a devops-shaped line. Not a timed assertion; run with
/// `cargo test -p strata-ingest --release -- --ignored --nocapture put_line_throughput`.
#[test]
#[ignore = "throughput check, prints lines/s"]
fn put_line_throughput() {
    let line = b"put cpu.user 1700000000 42.5 host=host-0001 dc=dc-1 rack=r-12 os=linux arch=x86 team=t-3\r\n";
    let cfg = ParseConfig::default();
    let n = 500_000u32;
    let start = std::time::Instant::now();
    let mut sum = 0i64;
    for _ in 0..n {
        let p = parse_put_line(std::hint::black_box(line), &cfg).unwrap();
        sum += p.ts_ms() + p.tags.len() as i64;
    }
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(sum);
    #[expect(clippy::print_stdout, reason = "this test exists to print a rate")]
    {
        println!(
            "parse_put_line: {:.0} lines/s ({n} lines in {secs:.3} s)",
            f64::from(n) / secs
        );
    }
}

/// The timestamp a `put` line reaches storage with.
fn ts_of(line: &str) -> Result<i64, String> {
    let cfg = ParseConfig::new();
    let p = parse_put_line(line.as_bytes(), &cfg)
        .and_then(check_units)
        .map_err(|e| e.to_string())?;
    Ok(p.to_tsdb().timestamp)
}

#[test]
fn sec_frac_timestamps_reach_storage_as_the_same_instant() {
    // Large seconds with a fraction: milliseconds, above the magnitude threshold.
    assert_eq!(ts_of("put m 1364410924.5 1 h=a"), Ok(1_364_410_924_500));
    assert_eq!(ts_of("put m 1364410924.250 1 h=a"), Ok(1_364_410_924_250));
    // Plain seconds and milliseconds pass through.
    assert_eq!(ts_of("put m 1364410924 1 h=a"), Ok(1_364_410_924));
    assert_eq!(ts_of("put m 1364410924000 1 h=a"), Ok(1_364_410_924_000));
    // Small seconds with a zero fraction stay seconds instead of becoming 5000 s.
    assert_eq!(ts_of("put m 5.000 1 h=a"), Ok(5));
    assert_eq!(ts_of("put m 5. 1 h=a"), Ok(5));
    // A real fraction of a small second cannot be stored: refused, not moved.
    let err = ts_of("put m 5.5 1 h=a").unwrap_err();
    assert_eq!(
        err,
        "put: invalid value: A fraction of a second needs a time after \
         1970-02-19T17:02:47Z: 5.500"
    );
    // Right at the threshold: 4294967.296 s is 0x1_0000_0000 ms, which reads as ms.
    assert_eq!(ts_of("put m 4294967.296 1 h=a"), Ok(4_294_967_296));
    assert!(ts_of("put m 4294967.295 1 h=a").is_err());
}
