use proptest::prelude::*;

use super::*;

fn parse(line: &str) -> Result<Line<'_>, &'static str> {
    let mut out = Line::default();
    parse_line(line, &mut out).map(|()| out)
}

fn tags<'a>(l: &'a Line<'_>) -> Vec<(&'a str, &'a str)> {
    l.tags.iter().map(|(k, v)| (&**k, &**v)).collect()
}

fn fields<'a>(l: &'a Line<'_>) -> Vec<(&'a str, FieldValue)> {
    l.fields.iter().map(|(k, v)| (&**k, *v)).collect()
}

#[test]
fn the_reference_examples_parse() -> Result<(), &'static str> {
    let l =
        parse("myMeasurement,tag1=value1,tag2=value2 fieldKey=\"fieldValue\" 1556813561098000000")?;
    assert_eq!(l.measurement, "myMeasurement");
    assert_eq!(tags(&l), [("tag1", "value1"), ("tag2", "value2")]);
    assert_eq!(fields(&l), [("fieldKey", FieldValue::Str)]);
    assert_eq!(l.timestamp, Some(1_556_813_561_098_000_000));

    let l = parse("home,room=Kitchen temp=22.5,hum=36.2,co=0i")?;
    assert_eq!(
        fields(&l),
        [
            ("temp", FieldValue::Float(22.5)),
            ("hum", FieldValue::Float(36.2)),
            ("co", FieldValue::Int(0))
        ]
    );
    assert_eq!(l.timestamp, None);

    let l = parse("m f=1u,g=-9223372036854775808i,h=t,i=FALSE,j=True,k=1e3,l=-.5,m=1.")?;
    assert_eq!(
        fields(&l),
        [
            ("f", FieldValue::UInt(1)),
            ("g", FieldValue::Int(i64::MIN)),
            ("h", FieldValue::Bool(true)),
            ("i", FieldValue::Bool(false)),
            ("j", FieldValue::Bool(true)),
            ("k", FieldValue::Float(1000.0)),
            ("l", FieldValue::Float(-0.5)),
            ("m", FieldValue::Float(1.0)),
        ]
    );
    Ok(())
}

#[test]
fn escapes_follow_the_reference() -> Result<(), &'static str> {
    // Spaces and commas in measurements; spaces, commas and equals signs in tag keys, tag
    // values and field keys.
    let l = parse(
        r#"my\ meas\,ure=ment,tag\ key\,1\==tag\ val\,1\= field\ k\,e\=y="str\"ing\\",f2=1i 5"#,
    )?;
    assert_eq!(l.measurement, "my meas,ure=ment");
    assert_eq!(tags(&l), [("tag key,1=", "tag val,1=")]);
    assert_eq!(
        fields(&l),
        [("field k,e=y", FieldValue::Str), ("f2", FieldValue::Int(1))]
    );
    assert_eq!(l.timestamp, Some(5));
    // Other backslashes are literal.
    let l = parse(r"c:\temp,p=C:\dir\x f\\n=1")?;
    assert_eq!(l.measurement, r"c:\temp");
    assert_eq!(tags(&l), [("p", r"C:\dir\x")]);
    assert_eq!(fields(&l), [(r"f\\n", FieldValue::Float(1.0))]);
    // A string value may hold delimiters.
    let l = parse(r#"m s="a, b=c d",x=2"#)?;
    assert_eq!(
        fields(&l),
        [("s", FieldValue::Str), ("x", FieldValue::Float(2.0))]
    );
    // Names without escapes borrow.
    let l = parse("cpu,host=a v=1")?;
    assert!(matches!(l.measurement, Cow::Borrowed(_)));
    Ok(())
}

#[test]
fn errors_name_the_problem() {
    for (line, why) in [
        (",t=a f=1", "missing measurement"),
        ("cpu", "missing fields"),
        ("cpu,host=a", "missing fields"),
        ("cpu,=a f=1", "missing tag key"),
        ("cpu,host f=1", "missing tag value"),
        ("cpu,host= f=1", "missing tag value"),
        ("cpu,host=a=b f=1", "invalid tag format"),
        ("cpu,a=1,a=2 f=1", "duplicate tags"),
        (r"cpu,a\ b=1,a\ b=2 f=1", "duplicate tags"),
        ("cpu =1", "missing field key"),
        ("cpu f", "invalid field format"),
        ("cpu f=1,g", "invalid field format"),
        ("cpu f=1,", "invalid field format"),
        ("cpu f=", "missing field value"),
        ("cpu f=,g=1", "missing field value"),
        ("cpu f=\"abc", "unbalanced quotes"),
        ("cpu f=1.2.3", "invalid number"),
        ("cpu f=1.5i", "invalid number"),
        ("cpu f=-1u", "invalid number"),
        ("cpu f=NaN", "invalid number"),
        ("cpu f=1e400", "invalid float"),
        (
            "cpu f=99999999999999999999i",
            "unable to parse integer: value out of range",
        ),
        ("cpu f=yes", "invalid boolean"),
        ("cpu f=1 12a", "bad timestamp"),
        ("cpu f=1 -", "bad timestamp"),
        ("cpu f=1 99999999999999999999", "bad timestamp"),
        ("cpu f=1 1 2", "point is invalid"),
    ] {
        assert_eq!(parse(line).err(), Some(why), "{line}");
    }
}

#[test]
fn lines_split_like_influxdb() {
    let body = b"# comment\n\n  \t\ncpu f=1\r\n  m s=\"two\nlines\" 5\nlast f=2";
    let got: Vec<_> = lines(body).collect();
    assert_eq!(
        got,
        [
            LineKind::Skip,
            LineKind::Skip,
            LineKind::Skip,
            LineKind::Point(b"cpu f=1"),
            LineKind::Point(b"m s=\"two\nlines\" 5"),
            LineKind::Point(b"last f=2"),
        ]
    );
    // An escaped newline does not end a line.
    assert_eq!(lines(b"a\\\nb f=1").count(), 1);
}

proptest! {
    /// Any bytes split and parse without a panic.
    #[test]
    fn arbitrary_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut out = Line::default();
        for kind in lines(&body) {
            if let LineKind::Point(raw) = kind
                && let Ok(text) = std::str::from_utf8(raw)
            {
                let _ = parse_line(text, &mut out);
            }
        }
    }

    /// Lines built from the protocol's own alphabet (where the edge cases are) never panic.
    #[test]
    fn protocol_alphabet_never_panics(line in "[a-c,= \\\\\"0-9.ieEtTfu\\-#\n]{0,60}") {
        let mut out = Line::default();
        for kind in lines(line.as_bytes()) {
            if let LineKind::Point(raw) = kind
                && let Ok(text) = std::str::from_utf8(raw)
            {
                let _ = parse_line(text, &mut out);
            }
        }
    }

    /// Escaping any names and writing a line gives those names back.
    #[test]
    fn escaped_names_round_trip(
        m in "[^\\n\\r#]{1,12}",
        k in "\\PC{1,8}",
        v in "\\PC{1,8}",
        f in "\\PC{1,8}",
        x in any::<i64>(),
        ts in any::<i64>(),
    ) {
        let esc = |s: &str, specials: &[char]| {
            let mut out = String::new();
            for c in s.chars() {
                if specials.contains(&c) {
                    out.push('\\');
                }
                out.push(c);
            }
            out
        };
        // A name ending in a backslash cannot be written (as in InfluxDB); neither can a
        // measurement starting with a space or `#`, nor a backslash before a special.
        prop_assume!(![&m, &k, &v, &f].iter().any(|s| s.contains('\\')));
        prop_assume!(!m.starts_with([' ', '\t', '\0']));
        let line = format!(
            "{},{}={} {}={x}i {ts}",
            esc(&m, &[',', ' ']),
            esc(&k, &[',', '=', ' ']),
            esc(&v, &[',', '=', ' ']),
            esc(&f, &[',', '=', ' ']),
        );
        let l = parse(&line).map_err(|e| TestCaseError::fail(format!("{line:?}: {e}")))?;
        prop_assert_eq!(&*l.measurement, m.as_str());
        prop_assert_eq!(tags(&l), vec![(k.as_str(), v.as_str())]);
        prop_assert_eq!(fields(&l), vec![(f.as_str(), FieldValue::Int(x))]);
        prop_assert_eq!(l.timestamp, Some(ts));
    }

    /// A float field is the nearest f64 to its text, the short decimals (parsed on their own
    /// path) as much as the rest, and a timestamp is its integer, to both ends of i64.
    #[test]
    fn numbers_parse_as_the_standard_parser_does(
        int in "-?[0-9]{1,10}",
        frac in "[0-9]{0,9}",
        exp in proptest::option::of(-30i32..30),
        ts in any::<i64>(),
    ) {
        let mut text = int.clone();
        if !frac.is_empty() {
            text.push('.');
            text.push_str(&frac);
        }
        if let Some(e) = exp {
            text.push_str(&format!("e{e}"));
        }
        let want: f64 = text.parse().map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        let line = format!("m f={text} {ts}");
        let l = parse(&line).map_err(|e| TestCaseError::fail(e.to_string()))?;
        match fields(&l).as_slice() {
            [(_, FieldValue::Float(got))] => prop_assert_eq!(got.to_bits(), want.to_bits(), "{}", text),
            other => prop_assert!(false, "{text}: {other:?}"),
        }
        prop_assert_eq!(l.timestamp, Some(ts));
    }
}

#[test]
fn timestamps_parse_to_the_ends_of_i64() {
    for (line, ts) in [
        ("cpu f=1 -9223372036854775808", Some(i64::MIN)),
        ("cpu f=1 9223372036854775807", Some(i64::MAX)),
        ("cpu f=1 -5", Some(-5)),
        ("cpu f=1 0", Some(0)),
        ("cpu f=1 -0", Some(0)),
        ("cpu f=1 007", Some(7)),
    ] {
        assert_eq!(parse(line).map(|l| l.timestamp), Ok(ts), "{line}");
    }
    for line in [
        "cpu f=1 9223372036854775808",
        "cpu f=1 -9223372036854775809",
        "cpu f=1 1-2",
        "cpu f=1 --1",
    ] {
        assert_eq!(parse(line).err(), Some("bad timestamp"), "{line}");
    }
}

#[test]
fn short_decimals_keep_their_sign_and_exact_value() {
    for (text, want) in [
        ("-0.0", -0.0f64),
        ("0.1", 0.1),
        ("54.7", 54.7),
        ("-1.25", -1.25),
    ] {
        let line = format!("m f={text}");
        let l = parse(&line).expect(text);
        match fields(&l).as_slice() {
            [(_, FieldValue::Float(got))] => assert_eq!(got.to_bits(), want.to_bits(), "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }
}
