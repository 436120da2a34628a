//! The graph page at `/`: served with its assets over plain HTTP, and drawn by a real browser
//! (headless Chromium driven by Selenium from PyPI, `tests/e2e/ui_browser.py`), which must plot
//! every point of a shared query URL, show the API's errors, and log no JavaScript error.
//!
//! The browser test needs Debian's `chromium` and `chromium-driver` and a Python venv with
//! `selenium`; `.ci/run` installs them. When one is missing the test fails and says how to get
//! it: it is never skipped.

use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::{Value as Json, json};

use crate::harness::Server;
use crate::telnet_put::barrier;

/// The whole browser run (Chromium start-up, every page, shut-down) must end within this.
const BROWSER_DEADLINE: Duration = Duration::from_secs(60);

/// The value of a header in a raw response head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[test]
fn the_page_and_its_assets_are_served_with_types_and_cache_headers() -> anyhow::Result<()> {
    let server = Server::start()?;
    let (status, head, page) = server.http_bytes("GET", "/", "", b"")?;
    assert_eq!(status, 200, "{head}");
    assert_eq!(
        header(&head, "content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(header(&head, "cache-control"), Some("no-cache"));
    assert!(header(&head, "content-security-policy").is_some_and(|p| p.contains("'self'")));
    let page = String::from_utf8(page)?;
    assert!(page.contains(r#"<div id="chart">"#), "{page}");

    // Every script and stylesheet the page names is served from here, cacheable for good.
    let assets: Vec<String> = page
        .split(['"', '\''])
        .filter(|s| s.starts_with("ui/"))
        .map(|s| format!("/{s}"))
        .collect();
    assert_eq!(assets.len(), 4, "{assets:?}");
    for asset in &assets {
        let (status, head, body) = server.http_bytes("GET", asset, "", b"")?;
        assert_eq!(status, 200, "{asset}: {head}");
        assert!(!body.is_empty(), "{asset}");
        let want = if asset.contains(".js?") {
            "text/javascript; charset=utf-8"
        } else {
            "text/css; charset=utf-8"
        };
        assert_eq!(header(&head, "content-type"), Some(want), "{asset}");
        assert_eq!(
            header(&head, "cache-control"),
            Some("public, max-age=31536000, immutable"),
            "{asset}"
        );
        // Revalidation: the same ETag gets a 304 with no body.
        let etag = header(&head, "etag").context("no ETag")?;
        let (status, _, body) =
            server.http_bytes("GET", asset, &format!("If-None-Match: {etag}\r\n"), b"")?;
        assert_eq!((status, body.len()), (304, 0), "{asset}");
    }
    // Without the version the asset is still served, but revalidated each time.
    let (status, head, _) = server.http_bytes("GET", "/ui/app.js", "", b"")?;
    assert_eq!(status, 200);
    assert_eq!(header(&head, "cache-control"), Some("no-cache"));

    let (status, head, body) = server.http_bytes("HEAD", "/", "", b"")?;
    assert_eq!((status, body.len()), (200, 0), "{head}");
    let (status, body) = server.http("POST", "/", b"")?;
    assert_eq!(status, 405, "{body}");
    for path in ["/ui/nope.js", "/nope", "/ui/"] {
        let (status, body) = server.http("GET", path, b"")?;
        assert_eq!(status, 404, "{path}");
        assert_eq!(
            body, r#"{"error":{"code":404,"message":"Page not found"}}"#,
            "{path}"
        );
    }
    Ok(())
}

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The points a query answer holds that a chart can draw (finite numbers), over all series.
fn drawable_points(answer: &Json) -> usize {
    answer
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["dps"].as_object().into_iter().flatten())
        .filter(|(_, v)| v.as_f64().is_some_and(f64::is_finite))
        .count()
}

/// What a browser needs: Chromium, its driver and a Python with Selenium.
struct Browser {
    chromium: PathBuf,
    chromedriver: PathBuf,
    python: PathBuf,
}

/// The first of `names` found in `$PATH` (or the path in `env_var`, when set).
fn find_program(env_var: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env_var) {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

/// The venv with Selenium: `$STRATA_E2E_VENV`, else `<target>/e2e-venv` (where `.ci/run` puts
/// it). Made here when missing, so the test also runs outside CI.
fn selenium_python() -> anyhow::Result<PathBuf> {
    let venv = crate::harness::e2e_venv()?;
    let python = venv.join("bin").join("python");
    let has_selenium = |python: &Path| {
        Command::new(python)
            .args(["-c", "import selenium"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if has_selenium(&python) {
        return Ok(python);
    }
    // Built beside the final place and renamed into it, so that a run that dies half-way
    // leaves no broken venv behind.
    let building = venv.with_extension(format!("building-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&building)
        .status()
        .is_ok_and(|s| s.success())
        && Command::new(building.join("bin").join("python"))
            .args(["-m", "pip", "install", "--quiet", "selenium>=4.11,<5"])
            .status()
            .is_ok_and(|s| s.success());
    if !made {
        let _ = std::fs::remove_dir_all(&building);
        bail!(
            "no Python venv with Selenium at {} and none could be made: run `python3 -m venv {0}` \
             and `{0}/bin/pip install selenium` (.ci/run does this)",
            venv.display()
        );
    }
    let _ = std::fs::remove_dir_all(&venv);
    std::fs::rename(&building, &venv)
        .with_context(|| format!("moving {} to {}", building.display(), venv.display()))?;
    ensure!(
        has_selenium(&python),
        "selenium is not importable from {}",
        python.display()
    );
    Ok(python)
}

fn browser() -> anyhow::Result<Browser> {
    const APT: &str = "apt-get install -y --no-install-recommends chromium chromium-driver";
    let chromium = find_program("STRATA_CHROMIUM", &["chromium", "chromium-browser"])
        .with_context(|| format!("Chromium is not installed (CI installs it: {APT})"))?;
    let chromedriver = find_program("STRATA_CHROMEDRIVER", &["chromedriver"])
        .with_context(|| format!("chromedriver is not installed (CI installs it: {APT})"))?;
    Ok(Browser {
        chromium,
        chromedriver,
        python: selenium_python()?,
    })
}

/// Runs `ui_browser.py` on a spec and returns its report, within [`BROWSER_DEADLINE`].
fn drive(browser: &Browser, spec: &Json) -> anyhow::Result<Json> {
    let dir = tempfile::tempdir()?;
    let spec_path = dir.path().join("spec.json");
    std::fs::write(&spec_path, spec.to_string())?;
    let out_path = dir.path().join("out.json");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/ui_browser.py");
    let mut child = Command::new(&browser.python)
        .arg(script)
        .arg(&spec_path)
        .env("SE_OFFLINE", "true")
        .stdout(std::fs::File::create(&out_path)?)
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the Selenium script")?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > BROWSER_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            bail!("the browser run did not finish within {BROWSER_DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut stderr)?;
    }
    ensure!(
        status.success(),
        "the Selenium script failed ({status}):\n{stderr}"
    );
    let out = std::fs::read_to_string(&out_path)?;
    serde_json::from_str(&out).with_context(|| format!("bad report {out:?}; stderr:\n{stderr}"))
}

/// Browser log entries that are errors.
fn severe(log: &Json) -> Vec<&Json> {
    log.as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["level"] == "SEVERE")
        .collect()
}

/// A script that is true once the legend shows the values under the cursor (`--` without one).
const LEGEND_HAS_VALUES: &str =
    "return document.querySelector('#chart .u-legend .u-value').textContent !== '--'";

/// A script that is true once the datalist `<name>-list` holds exactly `values` (comma-joined).
fn list_is(name: &str, values: &str) -> String {
    format!(
        "return Array.from(document.querySelectorAll('#{name}-list option'))\
         .map((o) => o.value).join() === '{values}'"
    )
}

fn get_query(server: &Server, path_and_query: &str) -> anyhow::Result<(u16, Json)> {
    let (status, body) = server.http("GET", path_and_query, b"")?;
    Ok((status, serde_json::from_str(&body).with_context(|| body)?))
}

#[test]
fn chromium_draws_every_point_of_a_shared_query_url() -> anyhow::Result<()> {
    let browser = browser()?;
    let server = Server::start()?;
    let now = now_s();
    let (t0, t1) = (now - 1200, now);
    // Over telnet: two hosts of a gauge (30 points each), a counter with a reset, and five
    // points within one second (they must stay five points on the chart).
    let mut conn = server.connect()?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut lines = String::new();
    for (host, base) in [("a", 0), ("b", 100)] {
        for i in 0..30 {
            let ts = now - 600 + i * 10;
            lines.push_str(&format!("put ui.cpu {ts} {} host={host} dc=x\n", base + i));
        }
    }
    for i in 0..20 {
        let ts = now - 600 + i * 15;
        let v = if i < 12 { i * 100 } else { (i - 12) * 100 };
        lines.push_str(&format!("put ui.bytes {ts} {v} host=a\n"));
    }
    for i in 0..5 {
        let ms = (now - 300) * 1000 + i * 100;
        lines.push_str(&format!("put ui.ms {ms} {}.5 host=a\n", i));
    }
    conn.write_all(lines.as_bytes())?;
    let errors = barrier(&mut conn, &mut reader)?;
    assert!(errors.is_empty(), "{errors:?}");

    let base = format!("http://{}", server.addr);
    let multi = format!(
        "start={t0}&end={t1}&m=sum:1m-max-zero:ui.cpu{{host=*}}\
         &m=max:rate{{counter,2000,0}}:ui.bytes&m=sum:ui.ms"
    );
    let (status, want_multi) = get_query(&server, &format!("/api/query?{multi}&ms"))?;
    assert_eq!(status, 200, "{want_multi}");
    let want_multi_points = drawable_points(&want_multi);
    let want_multi_series = want_multi.as_array().map_or(0, Vec::len);
    assert_eq!(want_multi_series, 4, "{want_multi}");
    let (status, bad) = get_query(&server, "/api/query?start=1h-ago&m=sum:no.such.metric")?;
    assert_eq!(status, 400);
    let bad_message = bad["error"]["message"]
        .as_str()
        .context("no error message")?
        .to_owned();

    let spec = json!({
        "base": base,
        "chromium": browser.chromium,
        "chromedriver": browser.chromedriver,
        "roundtrip": [
            "sum:ui.cpu{host=*}",
            "avg:1m-avg-nan:rate{counter,100,5}:explicit_tags:m{a=b}{c=d|e}",
            "zimsum:1h-sum:rate{dropcounter,,7}:sys.if.bytes{}{host=wildcard(web*)}",
            "max:rate:m",
        ],
        "pages": [
            {
                "path": "/?start=1h-ago&m=sum:ui.cpu{host=*}",
                // Hovering moves the cursor and fills the legend's values (styles the page's
                // policy must allow); then one host is picked.
                "actions": [
                    ["hover", "#chart .u-over"],
                    ["wait", LEGEND_HAS_VALUES],
                    ["type", ".tag-value", "a"],
                    ["click", "#go"],
                ],
            },
            { "path": format!("/?{multi}") },
            { "path": "/#start=1h-ago&m=sum:ui.cpu{host=*}" },
            { "path": "/?start=1h-ago&m=sum:no.such.metric" },
            {
                // Building a query from an empty page with the suggestions.
                "path": "/",
                "wait": false,
                "actions": [
                    ["type", ".metric", "ui."],
                    ["wait", list_is("metric", "ui.bytes,ui.cpu,ui.ms")],
                    ["type", ".metric", "ui.cpu"],
                    ["click", ".add-tag"],
                    ["type", ".tag-key", "h"],
                    ["wait", list_is("tagk", "host")],
                    ["type", ".tag-key", "host"],
                    ["type", ".tag-value", "b"],
                    ["wait", list_is("tagv", "*,b")],
                    ["click", "#go"],
                    ["wait", "return document.getElementById('chart').hasAttribute('data-points')"],
                ],
            },
        ],
    });
    let report = drive(&browser, &spec)?;
    let pages = report["pages"].as_array().context("no pages")?;
    let loaded = |i: usize| &pages[i]["loaded"];

    // The shared link draws both hosts' points, with one legend entry each, and nothing is
    // loaded from anywhere but this server.
    let first = loaded(0);
    assert_eq!(first["points"], "60", "{first}");
    assert_eq!(first["error"], Json::Null, "{first}");
    assert_eq!(first["canvases"], 1, "{first}");
    let legend: Vec<&str> = first["legend"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .collect();
    assert_eq!(
        legend,
        ["time", "ui.cpu{dc=x, host=a}", "ui.cpu{dc=x, host=b}"]
    );
    for page in pages {
        for url in page["loaded"]["resources"].as_array().into_iter().flatten() {
            let url = url.as_str().unwrap_or_default();
            assert!(
                url.starts_with(&format!("{base}/")),
                "loaded from elsewhere: {url}"
            );
        }
    }
    // Its copy boxes: the link as opened, curl without globbing, a body that runs.
    assert_eq!(
        first["link"],
        format!("{base}/?start=1h-ago&m=sum:ui.cpu{{host=*}}")
    );
    let curl = first["curl"].as_str().unwrap_or_default();
    assert!(
        curl.contains(&format!(
            "curl -sg '{base}/api/query?start=1h-ago&m=sum:ui.cpu{{host=*}}"
        )),
        "{curl}"
    );
    // Picking one host in the form redraws it and puts the new query in the URL.
    let acted = &pages[0]["acted"];
    assert_eq!(acted["points"], "30", "{acted}");
    assert_eq!(
        acted["url"],
        format!("{base}/?start=1h-ago&m=sum:ui.cpu{{host=a}}")
    );

    // Several m= with downsampling, fill, counter rate and millisecond points: the page draws
    // what the GET form of /api/query answers, and the body it shows answers the same.
    let multi_page = loaded(1);
    assert_eq!(
        multi_page["points"],
        want_multi_points.to_string(),
        "{multi_page}"
    );
    assert_eq!(
        multi_page["legend"].as_array().map_or(0, Vec::len),
        want_multi_series + 1
    );
    let body = multi_page["body"].as_str().context("no body")?;
    let (status, text) = server.http("POST", "/api/query", body.as_bytes())?;
    assert_eq!(status, 200, "{text}");
    assert_eq!(
        drawable_points(&serde_json::from_str(&text)?),
        want_multi_points
    );
    assert!(want_multi_points > 60, "{want_multi}");

    // OpenTSDB's own GUI keeps the query after `#`; such a link draws too.
    assert_eq!(loaded(2)["points"], "60", "{}", loaded(2));

    // An API error is shown with its message, and nothing claims to be drawn.
    let failed = loaded(3);
    assert_eq!(failed["points"], Json::Null, "{failed}");
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|e| e.contains(&bad_message)),
        "{failed} should show {bad_message:?}"
    );

    // The suggestions led to a query that draws host b.
    let built = &pages[4]["acted"];
    assert_eq!(built["points"], "30", "{built}");
    assert_eq!(
        built["url"],
        format!("{base}/?start=1h-ago&m=sum:ui.cpu{{host=b}}")
    );

    // The m= codec gives back what it read.
    assert_eq!(report["roundtrip"], spec["roundtrip"]);

    // No JavaScript error anywhere; the failed query's 400 is the only network error.
    for (i, page) in pages.iter().enumerate() {
        let errors: Vec<&Json> = severe(&page["log"])
            .into_iter()
            .filter(|e| {
                !(i == 3
                    && e["source"] == "network"
                    && e["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("/api/query")))
            })
            .collect();
        assert!(errors.is_empty(), "page {i} logged errors: {errors:?}");
    }
    assert!(severe(&report["log"]).is_empty(), "{}", report["log"]);
    Ok(())
}
