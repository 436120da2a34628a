//! Grafana's OpenTSDB data source, replayed: the exact requests its `datasource.ts` and its Go
//! backend plugin send (path L = the browser through Grafana's proxy, path B = the Go backend plugin), checking
//! every field Grafana reads.

use std::collections::BTreeSet;

use serde_json::{Value as Json, json};

use crate::api::put;
use crate::harness::Server;

const HOSTS: [(&str, &str); 4] = [
    ("host_0", "us-east-1"),
    ("host_1", "us-east-1"),
    ("host_2", "eu-west-1"),
    ("host_3", "eu-west-1"),
];

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A server holding the last hour of devops-style metrics (`cpu.user`, `cpu.system`,
/// `mem.used`, tags `host` and `region`), 10 s apart, and the time they end at.
fn devops_server() -> anyhow::Result<(Server, i64)> {
    let server = Server::start()?;
    let end = now_s() - 5;
    let mut points = Vec::new();
    for (h, (host, region)) in HOSTS.iter().enumerate() {
        for i in 0..360i64 {
            let ts = end - 3590 + i * 10;
            let tags = json!({"host": host, "region": region});
            // cpu.user climbs 10 per 10 s (a rate of 1/s), the others are gauges.
            points.push(json!({"metric":"cpu.user","timestamp":ts,"value":1000 * h as i64 + i * 10,"tags":tags}));
            points.push(json!({"metric":"cpu.system","timestamp":ts,"value":(i % 7) as f64 + 0.5,"tags":tags}));
            points.push(
                json!({"metric":"mem.used","timestamp":ts,"value":1024 + h as i64,"tags":tags}),
            );
        }
    }
    put(&server, &Json::Array(points))?;
    Ok((server, end))
}

fn get_json(server: &Server, method: &str, path: &str, body: &str) -> anyhow::Result<(u16, Json)> {
    let (status, text) = server.http(method, path, body.as_bytes())?;
    let v = serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{e}: {text}"))?;
    Ok((status, v))
}

fn strings(v: &Json) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
        })
        .unwrap_or_default()
        .unwrap_or_else(|| panic!("not an array of strings: {v}"))
}

/// `tag_names()`: the union of `results[].tags` keys.
fn tag_keys(v: &Json) -> BTreeSet<String> {
    v["results"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| {
            r["tags"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k.clone())
        })
        .collect()
}

/// `tag_values()`: the distinct string values of `results[].tags[key]`.
fn tag_values(v: &Json, key: &str) -> BTreeSet<String> {
    v["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            r["tags"][key]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| panic!("tag {key} is not a string in {r}"))
        })
        .collect()
}

/// The keys of the `dps` object of the first series, in the order they appear in the text
/// (JavaScript walks 13-digit keys in text order).
fn dps_keys_in_text_order(text: &str) -> Vec<String> {
    let Some(start) = text.find("\"dps\":{") else {
        return Vec::new();
    };
    let rest = &text[start + 7..];
    let end = rest.find('}').unwrap_or(rest.len());
    rest[..end]
        .split(',')
        .filter_map(|kv| kv.split(':').next())
        .map(|k| k.trim_matches('"').to_string())
        .filter(|k| !k.is_empty())
        .collect()
}

#[test]
fn save_and_test_health_checks_pass() -> anyhow::Result<()> {
    let (server, _) = devops_server()?;
    // Path L: any 2xx.
    let (status, v) = get_json(
        &server,
        "GET",
        "/api/suggest?type=metrics&q=cpu&max=1000",
        "",
    )?;
    assert!((200..300).contains(&status));
    assert_eq!(strings(&v), vec!["cpu.system", "cpu.user"]);
    // Path B: exactly 200, no max.
    let (status, _) = get_json(&server, "GET", "/api/suggest?q=cpu&type=metrics", "")?;
    assert_eq!(status, 200);
    // Old Angular builds sorted the parameters; an empty match still passes.
    let (status, v) = get_json(
        &server,
        "GET",
        "/api/suggest?max=1000&q=zzz&type=metrics",
        "",
    )?;
    assert_eq!((status, v), (200, json!([])));
    // On an empty database too.
    let empty = Server::start()?;
    let (status, v) = get_json(&empty, "GET", "/api/suggest?q=cpu&type=metrics", "")?;
    assert_eq!((status, v), (200, json!([])));
    Ok(())
}

#[test]
fn template_variable_queries() -> anyhow::Result<()> {
    let (server, _) = devops_server()?;
    // metrics(): the empty q is left out.
    let (_, v) = get_json(&server, "GET", "/api/suggest?type=metrics&max=1000", "")?;
    assert_eq!(strings(&v), vec!["cpu.system", "cpu.user", "mem.used"]);
    let (_, v) = get_json(
        &server,
        "GET",
        "/api/suggest?type=metrics&q=mem&max=1000",
        "",
    )?;
    assert_eq!(strings(&v), vec!["mem.used"]);
    // suggest_tagk() / suggest_tagv().
    let (_, v) = get_json(&server, "GET", "/api/suggest?type=tagk&max=1000", "")?;
    assert_eq!(strings(&v), vec!["host", "region"]);
    let (_, v) = get_json(&server, "GET", "/api/suggest?type=tagk&q=re&max=1000", "")?;
    assert_eq!(strings(&v), vec!["region"]);
    let (_, v) = get_json(
        &server,
        "GET",
        "/api/suggest?type=tagv&q=host_&max=1000",
        "",
    )?;
    assert_eq!(strings(&v), vec!["host_0", "host_1", "host_2", "host_3"]);
    let (_, v) = get_json(&server, "GET", "/api/suggest?type=tagv&q=us&max=1000", "")?;
    assert_eq!(strings(&v), vec!["us-east-1"]);
    // tag_names(cpu.user): path L, then path B (Go enc, keys sorted).
    for path in [
        "/api/search/lookup?m=cpu.user&limit=1000",
        "/api/search/lookup?limit=1000&m=cpu.user",
    ] {
        let (status, v) = get_json(&server, "GET", path, "")?;
        assert_eq!(status, 200, "{path}: {v}");
        assert_eq!(
            tag_keys(&v),
            BTreeSet::from(["host".into(), "region".into()])
        );
    }
    // tag_values(cpu.user, host): path L (browser enc keeps `*`), path B (limit 0 = all).
    let all_hosts: BTreeSet<String> = HOSTS.iter().map(|(h, _)| h.to_string()).collect();
    for path in [
        "/api/search/lookup?m=cpu.user%7Bhost%3D*%7D&limit=1000",
        "/api/search/lookup?limit=0&m=cpu.user%7Bhost%3D%2A%7D",
    ] {
        let (status, v) = get_json(&server, "GET", path, "")?;
        assert_eq!(status, 200, "{path}: {v}");
        assert_eq!(tag_values(&v, "host"), all_hosts, "{path}");
    }
    // tag_values(cpu.user, host, region=eu-west-1).
    let (_, v) = get_json(
        &server,
        "GET",
        "/api/search/lookup?m=cpu.user%7Bhost%3D*%2Cregion%3Deu-west-1%7D&limit=1000",
        "",
    )?;
    assert_eq!(
        tag_values(&v, "host"),
        BTreeSet::from(["host_2".into(), "host_3".into()])
    );
    // A missing limit is 25: 4 series fit.
    let (_, v) = get_json(
        &server,
        "GET",
        "/api/search/lookup?m=cpu.user%7Bhost%3D*%7D",
        "",
    )?;
    assert_eq!(v["results"].as_array().map(Vec::len), Some(4));
    Ok(())
}

#[test]
fn editor_helpers_aggregators_and_filters() -> anyhow::Result<()> {
    let server = Server::start()?;
    let (status, v) = get_json(&server, "GET", "/api/aggregators", "")?;
    assert_eq!(status, 200);
    let aggs = strings(&v);
    for a in [
        "avg", "sum", "min", "max", "dev", "zimsum", "mimmin", "mimmax",
    ] {
        assert!(aggs.iter().any(|x| x == a), "{a} missing from {aggs:?}");
    }
    let (status, v) = get_json(&server, "GET", "/api/config/filters", "")?;
    assert_eq!(status, 200);
    let filters = v.as_object().cloned().unwrap_or_default();
    for f in [
        "wildcard",
        "iliteral_or",
        "not_iliteral_or",
        "not_literal_or",
        "iwildcard",
        "literal_or",
        "regexp",
    ] {
        assert!(filters.contains_key(f), "{f} missing from {v}");
    }
    Ok(())
}

/// A path-L panel target as later Grafana builds send it: the whole cloned target.
fn browser_target() -> Json {
    json!({
        "metric": "cpu.user", "aggregator": "sum", "downsample": "1m-avg-null",
        "rate": true, "rateOptions": {"counter": false, "dropResets": true},
        "filters": [
            {"type": "wildcard", "tagk": "host", "filter": "*", "groupBy": true},
            {"type": "literal_or", "tagk": "region", "filter": "us-east-1|eu-west-1", "groupBy": false}
        ],
        "refId": "A", "datasource": {"type": "opentsdb", "uid": "P4F2"},
        "downsampleAggregator": "avg", "downsampleFillPolicy": "null", "downsampleInterval": "",
        "disableDownsampling": false, "shouldComputeRate": true, "isCounter": false,
        "counterMax": "", "counterResetValue": "", "alias": "", "hide": false, "tags": {}
    })
}

/// Checks what path L reads from each series: `metric`, string `tags`, `aggregateTags`, and an
/// ascending `dps` object keyed by seconds (or ms), values numbers or null.
fn check_browser_series(v: &Json, key_digits: usize) {
    let series = v.as_array().unwrap_or_else(|| panic!("not an array: {v}"));
    assert_eq!(series.len(), 4, "one series per host: {v}");
    let mut hosts = BTreeSet::new();
    for s in series {
        assert_eq!(s["metric"], "cpu.user");
        let tags = s["tags"].as_object().unwrap_or_else(|| panic!("tags: {s}"));
        assert!(tags.values().all(Json::is_string));
        hosts.insert(tags["host"].as_str().unwrap_or_default().to_string());
        assert!(tags.contains_key("region"), "{s}");
        assert!(s["aggregateTags"].is_array(), "{s}");
        let dps = s["dps"].as_object().unwrap_or_else(|| panic!("dps: {s}"));
        assert!(dps.len() >= 40, "{s}");
        for (k, val) in dps {
            assert_eq!(k.len(), key_digits, "{k}");
            assert!(k.parse::<i64>().is_ok());
            assert!(val.is_number() || val.is_null(), "{val}");
        }
        // The rate of a +10 per 10 s counter is 1/s wherever there is data, except in the
        // last, partial bucket (downsampling runs before the rate).
        let rates: Vec<f64> = dps.values().filter_map(Json::as_f64).collect();
        assert!(
            rates[..rates.len() - 1]
                .iter()
                .all(|r| (r - 1.0).abs() < 1e-9),
            "{s}"
        );
    }
    assert_eq!(hosts.len(), 4);
}

#[test]
fn panel_query_browser_path() -> anyhow::Result<()> {
    let (server, end) = devops_server()?;
    let start_ms = (end - 3000) * 1000;
    // Range ends at now: no `end`.
    let body = json!({"start": start_ms, "queries": [browser_target()],
                      "msResolution": false, "globalAnnotations": true});
    let (status, text) = server.http("POST", "/api/query", body.to_string().as_bytes())?;
    assert_eq!(status, 200, "{text}");
    let v: Json = serde_json::from_str(&text)?;
    check_browser_series(&v, 10);
    let keys = dps_keys_in_text_order(&text);
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "dps must be written in ascending order");
    // Version ==2.3 sends showQuery and reads query.index.
    let body = json!({"start": start_ms, "queries": [browser_target()], "msResolution": true,
                      "globalAnnotations": true, "showQuery": true, "end": end * 1000});
    let (status, text) = server.http("POST", "/api/query", body.to_string().as_bytes())?;
    assert_eq!(status, 200, "{text}");
    let v: Json = serde_json::from_str(&text)?;
    check_browser_series(&v, 13);
    assert!(
        v.as_array()
            .into_iter()
            .flatten()
            .all(|s| s["query"]["index"] == 0),
        "{v}"
    );
    let keys = dps_keys_in_text_order(&text);
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "13-digit keys are walked in text order");
    // Tags given as [] (Grafana issue #13369) mean none.
    let mut t = browser_target();
    t["tags"] = json!([]);
    let body = json!({"start": start_ms, "queries": [t], "msResolution": false, "globalAnnotations": true});
    let (status, text) = server.http("POST", "/api/query", body.to_string().as_bytes())?;
    assert_eq!(status, 200, "{text}");
    Ok(())
}

#[test]
fn panel_query_backend_path() -> anyhow::Result<()> {
    let (server, end) = devops_server()?;
    let start = end - 3000;
    // Version ==2.4: ?arrays=true, seconds, keys sorted, Go-marshalled sub-query.
    let body = format!(
        r#"{{"start":{start},"end":{end},"queries":[{{"aggregator":"sum","downsample":"1m-avg","filters":[{{"filter":"*","groupBy":true,"tagk":"host","type":"wildcard"}}],"metric":"cpu.user","rate":true,"rateOptions":{{"counter":true,"dropResets":true}}}}]}}"#
    );
    let (status, v) = get_json(&server, "POST", "/api/query?arrays=true", &body)?;
    assert_eq!(status, 200, "{v}");
    let series = v.as_array().cloned().unwrap_or_default();
    assert_eq!(series.len(), 4, "{v}");
    for s in &series {
        assert_eq!(s["metric"], "cpu.user");
        assert!(
            s["tags"]
                .as_object()
                .is_some_and(|t| t.values().all(Json::is_string))
        );
        assert!(s["aggregateTags"].is_array());
        let dps = s["dps"].as_array().unwrap_or_else(|| panic!("dps: {s}"));
        assert!(dps.len() >= 40, "{s}");
        let mut prev = 0;
        for (i, p) in dps.iter().enumerate() {
            let ts = p[0].as_i64().unwrap_or_else(|| panic!("ts: {p}"));
            assert_eq!(ts.to_string().len(), 10, "seconds: {p}");
            assert!(ts > prev, "ascending");
            prev = ts;
            let rate = p[1].as_f64().unwrap_or_else(|| panic!("value: {p}"));
            assert!(i + 1 == dps.len() || (rate - 1.0).abs() < 1e-9, "{p}");
        }
    }
    // Other versions: a map keyed by seconds; tags group (region) and the rest aggregate.
    let body = format!(
        r#"{{"start":{start},"end":{end},"queries":[{{"aggregator":"avg","downsample":"5m-avg","metric":"mem.used","tags":{{"region":"us-east-1"}}}}]}}"#
    );
    let (status, v) = get_json(&server, "POST", "/api/query", &body)?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v[0]["tags"], json!({"region": "us-east-1"}));
    assert_eq!(v[0]["aggregateTags"], json!(["host"]));
    let dps = v[0]["dps"].as_object().cloned().unwrap_or_default();
    assert!(!dps.is_empty());
    for (k, val) in &dps {
        assert_eq!(k.len(), 10);
        assert_eq!(val.as_f64(), Some(1024.5), "{k}");
    }
    Ok(())
}

#[test]
fn query_errors_carry_error_message() -> anyhow::Result<()> {
    let (server, end) = devops_server()?;
    let start_ms = (end - 600) * 1000;
    let body = json!({"start": start_ms, "queries": [{"metric": "nope", "aggregator": "sum"}],
                      "msResolution": false, "globalAnnotations": true});
    let (status, v) = get_json(&server, "POST", "/api/query", &body.to_string())?;
    assert_eq!(status, 400);
    assert_eq!(v["error"]["message"], "No such name for 'metrics': 'nope'");
    // Provisioned queries without a downsample aggregator: a clean 400.
    for ds in ["1m-", "1m-undefined"] {
        let body = json!({"start": start_ms, "queries": [{"metric": "cpu.user", "aggregator": "sum", "downsample": ds}]});
        let (status, v) = get_json(&server, "POST", "/api/query", &body.to_string())?;
        assert_eq!(status, 400, "{ds}: {v}");
        assert!(v["error"]["message"].is_string());
    }
    Ok(())
}

/// Creates a global and a per-series annotation inside the data's range.
fn annotate(server: &Server, end: i64) -> anyhow::Result<()> {
    let (_, v) = get_json(
        server,
        "GET",
        "/api/search/lookup?m=cpu.user%7Bhost%3Dhost_0%7D",
        "",
    )?;
    let tsuid = v["results"][0]["tsuid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for note in [
        json!({"startTime": end - 600, "description": "global deploy"}),
        json!({"startTime": end - 300, "description": "host_0 reboot", "tsuid": tsuid}),
    ] {
        let (status, v) = get_json(server, "POST", "/api/annotation", &note.to_string())?;
        assert_eq!(status, 200, "{v}");
    }
    Ok(())
}

#[test]
fn annotation_query_is_answered() -> anyhow::Result<()> {
    let (server, end) = devops_server()?;
    annotate(&server, end)?;
    let body = json!({"start": (end - 3000) * 1000, "queries": [{"aggregator": "sum", "metric": "cpu.user"}],
                      "msResolution": false, "globalAnnotations": true});
    let (status, v) = get_json(&server, "POST", "/api/query", &body.to_string())?;
    assert_eq!(status, 200, "{v}");
    // Grafana reads response[0] only.
    assert_eq!(v[0]["metric"], "cpu.user");
    for field in ["annotations", "globalAnnotations"] {
        if let Some(list) = v[0].get(field) {
            for a in list.as_array().into_iter().flatten() {
                assert!(
                    a["description"].is_string() && a["startTime"].is_i64(),
                    "{a}"
                );
            }
        }
    }
    Ok(())
}

#[test]
fn annotation_query_returns_series_and_global_annotations() -> anyhow::Result<()> {
    let (server, end) = devops_server()?;
    annotate(&server, end)?;
    // Path L: globalAnnotations is always sent; startTime must be seconds.
    let body = json!({"start": (end - 3000) * 1000, "queries": [{"aggregator": "sum", "metric": "cpu.user"}],
                      "msResolution": false, "globalAnnotations": true});
    let (status, v) = get_json(&server, "POST", "/api/query", &body.to_string())?;
    assert_eq!(status, 200, "{v}");
    let first = &v[0];
    assert_eq!(
        first["annotations"][0]["description"], "host_0 reboot",
        "{first}"
    );
    assert_eq!(first["annotations"][0]["startTime"], end - 300);
    assert_eq!(
        first["globalAnnotations"][0]["description"],
        "global deploy"
    );
    assert_eq!(first["globalAnnotations"][0]["startTime"], end - 600);
    // Path B, version 2.4: seconds, arrays, no globalAnnotations asked.
    let body = format!(
        r#"{{"start":{},"end":{end},"queries":[{{"aggregator":"sum","metric":"cpu.user"}}]}}"#,
        end - 3000
    );
    let (status, v) = get_json(&server, "POST", "/api/query?arrays=true", &body)?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v[0]["annotations"][0]["description"], "host_0 reboot",
        "{v}"
    );
    Ok(())
}
