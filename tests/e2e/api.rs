//! The OpenTSDB HTTP API beyond put and query: `/api/search/lookup`, `/api/query/last`,
//! `/api/annotation*`, `/api/uid/*`, `/api/config`, `/api/serializers`. Each endpoint is
//! checked for success and for bad input (400 with OpenTSDB's error JSON, nothing changed).

use serde_json::{Value as Json, json};

use crate::harness::Server;

/// Sends a request and parses the JSON body (`Null` for an empty one).
fn call(server: &Server, method: &str, path: &str, body: &str) -> anyhow::Result<(u16, Json)> {
    let (status, text) = server.http(method, path, body.as_bytes())?;
    let v = if text.trim().is_empty() {
        Json::Null
    } else {
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{e}: {text}"))?
    };
    Ok((status, v))
}

/// Asserts OpenTSDB's error shape and returns the message.
fn assert_error(status: u16, v: &Json, want: u16) -> String {
    assert_eq!(status, want, "{v}");
    assert_eq!(v["error"]["code"], want, "{v}");
    v["error"]["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no error.message in {v}"))
}

/// Writes points with `?sync`.
pub(crate) fn put(server: &Server, points: &Json) -> anyhow::Result<()> {
    let (status, body) = server.http("POST", "/api/put?sync", points.to_string().as_bytes())?;
    anyhow::ensure!(status == 204, "put failed: {status} {body}");
    Ok(())
}

fn cpu_points() -> Json {
    json!([
        {"metric":"sys.cpu.user","timestamp":1356998400,"value":10,"tags":{"host":"web01","dc":"lga"}},
        {"metric":"sys.cpu.user","timestamp":1356998460,"value":11.5,"tags":{"host":"web01","dc":"lga"}},
        {"metric":"sys.cpu.user","timestamp":1356998400,"value":20,"tags":{"host":"web02","dc":"lga"}},
        {"metric":"sys.cpu.user","timestamp":1356998400,"value":30,"tags":{"host":"web03","dc":"sjc"}},
        {"metric":"sys.mem","timestamp":1356998400,"value":5,"tags":{"host":"web01"}}
    ])
}

fn hosts(v: &Json) -> Vec<String> {
    let mut h: Vec<String> = v["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["tags"]["host"].as_str().map(str::to_string))
        .collect();
    h.sort();
    h
}

#[test]
fn lookup_matches_metric_tags_and_wildcards() -> anyhow::Result<()> {
    let server = Server::start()?;
    put(&server, &cpu_points())?;
    let (status, v) = call(&server, "GET", "/api/search/lookup?m=sys.cpu.user", "")?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["type"], "LOOKUP");
    assert_eq!(v["metric"], "sys.cpu.user");
    assert_eq!(v["limit"], 25);
    assert_eq!(v["startIndex"], 0);
    assert_eq!(v["totalResults"], 3);
    assert!(v["time"].is_f64(), "time is milliseconds as a float: {v}");
    assert_eq!(v["tags"], json!([]));
    let first = &v["results"][0];
    assert_eq!(first["metric"], "sys.cpu.user");
    // metric UID + two tag pairs, 3 bytes each, in hex.
    assert!(first["tsuid"].as_str().is_some_and(|t| t.len() == 30));
    assert!(first["tags"]["dc"].is_string());
    // Results are in TSUID order.
    let tsuids: Vec<&str> = v["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["tsuid"].as_str())
        .collect();
    let mut sorted = tsuids.clone();
    sorted.sort();
    assert_eq!(tsuids, sorted);

    let cases = [
        ("sys.cpu.user%7Bdc%3Dlga%7D", vec!["web01", "web02"]),
        ("sys.cpu.user{host=*,dc=sjc}", vec!["web03"]),
        (
            "sys.cpu.user{dc=sjc,dc=lga}",
            vec!["web01", "web02", "web03"],
        ),
        (
            "sys.cpu.user{host=web01,host=*}",
            vec!["web01", "web02", "web03"],
        ),
        ("sys.cpu.user{host=}", vec!["web01", "web02", "web03"]),
        ("%7Bhost%3Dweb01%7D", vec!["web01", "web01"]),
        ("{*=sjc}", vec!["web03"]),
        ("{=sjc,=web02}", vec!["web02", "web03"]),
        ("sys.mem{dc=*}", vec![]),
    ];
    for (m, want) in cases {
        let (status, v) = call(&server, "GET", &format!("/api/search/lookup?m={m}"), "")?;
        assert_eq!(status, 200, "{m}: {v}");
        assert_eq!(hosts(&v), want, "{m}");
        assert_eq!(v["totalResults"], want.len(), "{m}");
    }
    let (_, v) = call(
        &server,
        "GET",
        "/api/search/lookup?m=sys.cpu.user&limit=1",
        "",
    )?;
    assert_eq!(
        (v["limit"].clone(), v["totalResults"].clone()),
        (json!(1), json!(1))
    );
    let (_, v) = call(
        &server,
        "GET",
        "/api/search/lookup?m=sys.cpu.user&limit=0",
        "",
    )?;
    assert_eq!(v["totalResults"], 3);
    let (_, v) = call(&server, "GET", "/api/search/lookup?m={host=web01}", "")?;
    assert_eq!(v["metric"], "*");
    // POST.
    let (status, v) = call(
        &server,
        "POST",
        "/api/search/lookup",
        r#"{"metric":"sys.cpu.user","tags":[{"key":"dc","value":"lga"}],"limit":25,"useMeta":true}"#,
    )?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(hosts(&v), vec!["web01", "web02"]);
    assert_eq!(v["tags"], json!([{"key":"dc","value":"lga"}]));
    Ok(())
}

#[test]
fn lookup_rejects_bad_input() -> anyhow::Result<()> {
    let server = Server::start()?;
    put(&server, &cpu_points())?;
    let (s, v) = call(&server, "GET", "/api/search/lookup", "")?;
    assert_eq!(assert_error(s, &v, 400), "Missing parameter <code>m</code>");
    let (s, v) = call(&server, "GET", "/api/search/lookup?m=sys.cpu.user{host", "")?;
    assert_eq!(assert_error(s, &v, 400), "Unable to parse query");
    let (s, v) = call(
        &server,
        "GET",
        "/api/search/lookup?m=sys.cpu.user&limit=ten",
        "",
    )?;
    assert_eq!(
        assert_error(s, &v, 400),
        "Unable to convert 'limit' to a valid number"
    );
    let (s, v) = call(&server, "GET", "/api/search/lookup?m=nope", "")?;
    assert_eq!(
        assert_error(s, &v, 404),
        "Unable to resolve one or more UIDs"
    );
    let (s, v) = call(
        &server,
        "GET",
        "/api/search/lookup?m=sys.cpu.user{host=nope}",
        "",
    )?;
    assert_eq!(
        assert_error(s, &v, 404),
        "Unable to resolve one or more UIDs"
    );
    let (s, v) = call(&server, "POST", "/api/search/lookup", "{}")?;
    assert_eq!(
        assert_error(s, &v, 400),
        "Missing metric and tags. Please supply at least one value."
    );
    let (s, v) = call(&server, "POST", "/api/search/lookup", "{not json")?;
    assert_eq!(assert_error(s, &v, 400), "Unable to parse the given JSON");
    let (s, v) = call(&server, "POST", "/api/search/lookup", r#"{"tags":"x"}"#)?;
    assert_error(s, &v, 400);
    let (s, v) = call(&server, "DELETE", "/api/search/lookup?m=sys.cpu.user", "")?;
    assert_error(s, &v, 405);
    // Nothing changed: the lookup of an unknown name did not create it.
    let (_, v) = call(&server, "GET", "/api/suggest?type=metrics&q=nope", "")?;
    assert_eq!(v, json!([]));
    Ok(())
}

#[test]
fn query_last_answers_latest_points_and_survives_restart() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(dir.path(), &[])?;
    put(&server, &cpu_points())?;
    let (status, v) = call(
        &server,
        "GET",
        "/api/query/last?timeseries=sys.cpu.user%7Bhost%3Dweb01%7D",
        "",
    )?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v[0]["timestamp"], 1_356_998_460_000i64);
    assert_eq!(v[0]["value"], "11.5");
    let tsuid = v[0]["tsuid"].as_str().unwrap_or_default().to_string();
    assert_eq!(tsuid.len(), 30);
    assert!(v[0].get("metric").is_none(), "{v}");
    // resolve adds metric and tags; a metric-only sub-query matches every series of it.
    let (_, v) = call(
        &server,
        "GET",
        "/api/query/last?timeseries=sys.cpu.user&resolve",
        "",
    )?;
    assert_eq!(v.as_array().map(Vec::len), Some(3), "{v}");
    assert!(
        v.as_array()
            .into_iter()
            .flatten()
            .all(|p| p["metric"] == "sys.cpu.user"
                && p["tags"]["host"].is_string()
                && p["value"].is_string())
    );
    // TSUIDs, GET and POST.
    let (_, v) = call(
        &server,
        "GET",
        &format!("/api/query/last?tsuids={tsuid}"),
        "",
    )?;
    assert_eq!(v[0]["value"], "11.5");
    let (status, v) = call(
        &server,
        "POST",
        "/api/query/last",
        &json!({"queries":[{"metric":"sys.mem","tags":{"host":"web01"}},{"tsuids":[tsuid]}],
                "resolveNames":true,"backScan":0})
        .to_string(),
    )?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v.as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!(
        (v[0]["metric"].clone(), v[0]["value"].clone()),
        (json!("sys.mem"), json!("5"))
    );
    assert_eq!(v[1]["tags"], json!({"host":"web01","dc":"lga"}));
    // back_scan: these 2013 points are far older than the last 24 hours.
    let (_, v) = call(
        &server,
        "GET",
        "/api/query/last?timeseries=sys.mem%7Bhost%3Dweb01%7D&back_scan=24",
        "",
    )?;
    assert_eq!(v, json!([]));
    // After a restart the last points come back from storage.
    server.stop()?;
    let server = Server::start_in(dir.path(), &[])?;
    let (_, v) = call(
        &server,
        "GET",
        &format!("/api/query/last?tsuids={tsuid}&resolve"),
        "",
    )?;
    assert_eq!(v[0]["value"], "11.5", "{v}");
    assert_eq!(v[0]["timestamp"], 1_356_998_460_000i64);
    Ok(())
}

#[test]
fn query_last_rejects_bad_input() -> anyhow::Result<()> {
    let server = Server::start()?;
    put(&server, &cpu_points())?;
    let (s, v) = call(&server, "GET", "/api/query/last", "")?;
    assert_eq!(assert_error(s, &v, 400), "Missing sub queries");
    let (s, v) = call(&server, "POST", "/api/query/last", r#"{"queries":[]}"#)?;
    assert_eq!(assert_error(s, &v, 400), "Missing sub queries");
    let (s, v) = call(&server, "GET", "/api/query/last?timeseries=nope", "")?;
    assert_eq!(
        assert_error(s, &v, 400),
        "No such name for 'metrics': 'nope'"
    );
    let (s, v) = call(
        &server,
        "GET",
        "/api/query/last?timeseries=sys.cpu.user%7Bhost%3Dweb09%7D",
        "",
    )?;
    assert_eq!(assert_error(s, &v, 400), "No such name for 'tagv': 'web09'");
    let (s, v) = call(&server, "GET", "/api/query/last?tsuids=XYZ", "")?;
    assert_error(s, &v, 400);
    let (s, v) = call(
        &server,
        "GET",
        "/api/query/last?timeseries=sys.mem&back_scan=x",
        "",
    )?;
    assert_error(s, &v, 400);
    let (s, v) = call(&server, "POST", "/api/query/last", "[1,2")?;
    assert_eq!(assert_error(s, &v, 400), "Unable to parse the given JSON");
    let (s, v) = call(
        &server,
        "POST",
        "/api/query/last",
        r#"{"queries":[{"tags":{}}]}"#,
    )?;
    assert_error(s, &v, 400);
    let (s, v) = call(&server, "PUT", "/api/query/last", "")?;
    assert_error(s, &v, 405);
    // Nothing changed: still exactly the three series.
    let (_, v) = call(&server, "GET", "/api/search/lookup?m=sys.cpu.user", "")?;
    assert_eq!(v["totalResults"], 3);
    Ok(())
}

#[test]
fn annotations_create_merge_replace_delete_and_persist() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Server::start_in(dir.path(), &[])?;
    put(&server, &cpu_points())?;
    let (_, v) = call(&server, "GET", "/api/query/last?timeseries=sys.mem", "")?;
    let tsuid = v[0]["tsuid"].as_str().unwrap_or_default().to_string();

    // POST creates.
    let note = json!({"startTime":1356998400,"description":"deploy","notes":"v1.2",
                      "custom":{"owner":"ops"}});
    let (status, v) = call(&server, "POST", "/api/annotation", &note.to_string())?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v,
        json!({"tsuid":"","description":"deploy","notes":"v1.2","custom":{"owner":"ops"},
               "endTime":0,"startTime":1356998400})
    );
    let (status, got) = call(&server, "GET", "/api/annotation?start_time=1356998400", "")?;
    assert_eq!((status, &got), (200, &v));
    // POST merges: only the end time changes.
    let (_, v) = call(
        &server,
        "POST",
        "/api/annotation",
        r#"{"startTime":1356998400,"endTime":1356998500}"#,
    )?;
    assert_eq!(
        (
            v["description"].clone(),
            v["notes"].clone(),
            v["endTime"].clone()
        ),
        (json!("deploy"), json!("v1.2"), json!(1356998500))
    );
    assert_eq!(v["custom"], json!({"owner":"ops"}));
    // Nothing set: 304, nothing stored changes.
    let (status, _) = call(
        &server,
        "POST",
        "/api/annotation",
        r#"{"startTime":1356998400}"#,
    )?;
    assert_eq!(status, 304);
    // PUT replaces: omitted fields reset.
    let (_, v) = call(
        &server,
        "PUT",
        "/api/annotation",
        r#"{"startTime":1356998400,"description":"redeploy"}"#,
    )?;
    assert_eq!(
        v,
        json!({"tsuid":"","description":"redeploy","notes":"","endTime":0,"startTime":1356998400})
    );
    // A per-series annotation, through the query string.
    let (status, v) = call(
        &server,
        "POST",
        &format!("/api/annotation?tsuid={tsuid}&start_time=1356998460&description=oom"),
        "",
    )?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["tsuid"], tsuid.as_str());
    // The global one does not answer for the series and vice versa.
    let (status, _) = call(
        &server,
        "GET",
        &format!("/api/annotation?tsuid={tsuid}&start_time=1356998400"),
        "",
    )?;
    assert_eq!(status, 404);
    // /api/annotations lists the global ones in a range.
    let (_, v) = call(
        &server,
        "GET",
        "/api/annotations?start_time=1356998000&end_time=1356999000",
        "",
    )?;
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{v}");
    // Restart: both are still there.
    server.stop()?;
    let server = Server::start_in(dir.path(), &[])?;
    let (_, v) = call(&server, "GET", "/api/annotation?start_time=1356998400", "")?;
    assert_eq!(v["description"], "redeploy");
    let (_, v) = call(
        &server,
        "GET",
        &format!("/api/annotation?tsuid={tsuid}&start_time=1356998460"),
        "",
    )?;
    assert_eq!(v["description"], "oom");
    // DELETE: 204, then 404.
    let (status, _) = call(
        &server,
        "DELETE",
        "/api/annotation",
        r#"{"startTime":1356998400}"#,
    )?;
    assert_eq!(status, 204);
    let (s, v) = call(&server, "GET", "/api/annotation?start_time=1356998400", "")?;
    assert_eq!(
        assert_error(s, &v, 404),
        "Unable to locate annotation in storage"
    );
    Ok(())
}

#[test]
fn annotations_reject_bad_input() -> anyhow::Result<()> {
    let server = Server::start()?;
    let (s, v) = call(&server, "POST", "/api/annotation", r#"{"description":"x"}"#)?;
    assert_eq!(assert_error(s, &v, 400), "Missing start time");
    let (s, v) = call(&server, "GET", "/api/annotation", "")?;
    assert_eq!(assert_error(s, &v, 400), "Missing start time");
    let (s, v) = call(
        &server,
        "POST",
        "/api/annotation",
        r#"{"startTime":10,"tsuid":"XYZ","description":"x"}"#,
    )?;
    assert_error(s, &v, 400);
    let (s, v) = call(
        &server,
        "POST",
        "/api/annotation",
        r#"{"startTime":10,"description":5}"#,
    )?;
    assert_eq!(assert_error(s, &v, 400), "Unable to parse the given JSON");
    let (s, v) = call(&server, "POST", "/api/annotation", "{oops")?;
    assert_eq!(assert_error(s, &v, 400), "Unable to parse the given JSON");
    let (s, v) = call(&server, "PATCH", "/api/annotation", "")?;
    assert_error(s, &v, 405);
    let (s, v) = call(&server, "GET", "/api/annotations", "")?;
    assert_eq!(assert_error(s, &v, 400), "Missing start time");
    let (s, v) = call(&server, "GET", "/api/annotations?start_time=yesterday", "")?;
    assert_error(s, &v, 400);
    // Bulk: one bad element rejects the whole array before anything is written.
    let (s, v) = call(
        &server,
        "POST",
        "/api/annotation/bulk",
        r#"[{"startTime":10,"description":"ok"},{"description":"no start"}]"#,
    )?;
    assert_eq!(assert_error(s, &v, 400), "Missing start time");
    let (s, v) = call(
        &server,
        "POST",
        "/api/annotation/bulk",
        r#"{"startTime":10}"#,
    )?;
    assert_error(s, &v, 400);
    let (s, v) = call(
        &server,
        "DELETE",
        "/api/annotation/bulk",
        r#"{"global":true}"#,
    )?;
    assert_eq!(assert_error(s, &v, 400), "Missing the start time value");
    let (s, v) = call(
        &server,
        "DELETE",
        "/api/annotation/bulk",
        r#"{"startTime":"1"}"#,
    )?;
    assert_eq!(
        assert_error(s, &v, 400),
        "Missing the TSUIDs or global annotations flag"
    );
    let (s, v) = call(&server, "GET", "/api/annotation/bulk", "")?;
    assert_error(s, &v, 405);
    // Nothing changed.
    let (_, v) = call(&server, "GET", "/api/annotations?start_time=0", "")?;
    assert_eq!(v, json!([]));
    let (s, _) = call(&server, "GET", "/api/annotation?start_time=10", "")?;
    assert_eq!(s, 404);
    Ok(())
}

#[test]
fn annotation_bulk_writes_and_deletes_ranges() -> anyhow::Result<()> {
    let server = Server::start()?;
    put(&server, &cpu_points())?;
    let (_, v) = call(&server, "GET", "/api/query/last?timeseries=sys.mem", "")?;
    let tsuid = v[0]["tsuid"].as_str().unwrap_or_default().to_string();
    let body = json!([
        {"startTime":1356998400,"description":"a"},
        {"startTime":1356998500,"description":"b"},
        {"startTime":1356998600,"description":"c"},
        {"startTime":1356998450,"description":"s","tsuid":tsuid},
        {"startTime":1356998460}
    ]);
    let (status, v) = call(&server, "POST", "/api/annotation/bulk", &body.to_string())?;
    assert_eq!(status, 200, "{v}");
    // The element that changes nothing is skipped, as OpenTSDB does.
    assert_eq!(v.as_array().map(Vec::len), Some(4), "{v}");
    let (status, v) = call(
        &server,
        "DELETE",
        "/api/annotation/bulk",
        r#"{"startTime":"1356998400","endTime":"1356998550","global":true}"#,
    )?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["totalDeleted"], 2);
    assert_eq!(v["startTime"], 1_356_998_400_000i64);
    assert_eq!(v["global"], true);
    let (_, v) = call(&server, "GET", "/api/annotations?start_time=1356998000", "")?;
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v[0]["description"], "c");
    // Query-string form for the series.
    let (_, v) = call(
        &server,
        "DELETE",
        &format!("/api/annotation/bulk?start_time=1356998000&tsuids={tsuid}"),
        "",
    )?;
    assert_eq!(v["totalDeleted"], 1, "{v}");
    Ok(())
}

#[test]
fn uid_assign_reports_per_name_results() -> anyhow::Result<()> {
    let server = Server::start()?;
    let (status, v) = call(
        &server,
        "GET",
        "/api/uid/assign?metric=a.b,c.d&tagk=host",
        "",
    )?;
    assert_eq!(status, 200, "{v}");
    assert!(v["metric"]["a.b"].as_str().is_some_and(|u| u.len() == 6));
    assert!(v["metric"]["c.d"].is_string());
    assert!(v["tagk"]["host"].is_string());
    assert!(v.get("tagv").is_none());
    let uid = v["metric"]["a.b"].as_str().unwrap_or_default().to_string();
    // Again, plus a bad name: 400, the good one is still assigned.
    let (status, v) = call(
        &server,
        "POST",
        "/api/uid/assign",
        r#"{"metric":["a.b","x!","e.f"],"tagv":[]}"#,
    )?;
    assert_eq!(status, 400, "{v}");
    assert_eq!(
        v["metric_errors"]["a.b"],
        format!("Name already exists with UID: {uid}")
    );
    assert!(
        v["metric_errors"]["x!"]
            .as_str()
            .is_some_and(|m| m.contains("illegal character: !")),
        "{v}"
    );
    assert!(v["metric"]["e.f"].is_string());
    // Bad input.
    let (s, v) = call(&server, "GET", "/api/uid/assign", "")?;
    assert_eq!(assert_error(s, &v, 400), "Missing values to assign UIDs");
    let (s, v) = call(&server, "POST", "/api/uid/assign", r#"{"metric":"a"}"#)?;
    assert_eq!(assert_error(s, &v, 400), "Unable to parse the given JSON");
    let (s, v) = call(&server, "DELETE", "/api/uid/assign", "")?;
    assert_error(s, &v, 405);
    let (s, v) = call(&server, "GET", "/api/uid/other", "")?;
    assert_error(s, &v, 501);
    // Nothing changed by the bad calls.
    let (_, v) = call(&server, "GET", "/api/suggest?type=metrics", "")?;
    assert_eq!(v, json!(["a.b", "c.d", "e.f"]));
    Ok(())
}

#[test]
fn uid_meta_and_tsmeta_describe_names_and_series() -> anyhow::Result<()> {
    let server = Server::start()?;
    put(&server, &cpu_points())?;
    let (_, v) = call(&server, "GET", "/api/uid/assign?metric=solo", "")?;
    let uid = v["metric"]["solo"].as_str().unwrap_or_default().to_string();
    let (status, v) = call(
        &server,
        "GET",
        &format!("/api/uid/uidmeta?uid={uid}&type=metric"),
        "",
    )?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["uid"].clone(), v["type"].clone(), v["name"].clone()),
        (json!(uid), json!("METRIC"), json!("solo"))
    );
    let (s, v) = call(
        &server,
        "GET",
        "/api/uid/uidmeta?uid=FFFFFF&type=metric",
        "",
    )?;
    assert_eq!(assert_error(s, &v, 404), "Could not find the requested UID");
    let (s, v) = call(&server, "GET", "/api/uid/uidmeta?uid=000001&type=bogus", "")?;
    assert_error(s, &v, 400);
    let (s, v) = call(&server, "GET", "/api/uid/uidmeta?type=metric", "")?;
    assert_eq!(
        assert_error(s, &v, 400),
        "Missing parameter <code>uid</code>"
    );
    let (s, v) = call(&server, "GET", "/api/uid/uidmeta?uid=zz&type=metric", "")?;
    assert_error(s, &v, 400);

    let (status, list) = call(&server, "GET", "/api/uid/tsmeta?m=sys.cpu.user{dc=lga}", "")?;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list.as_array().map(Vec::len), Some(2), "{list}");
    assert_eq!(list[0]["metric"]["name"], "sys.cpu.user");
    assert_eq!(list[0]["tags"].as_array().map(Vec::len), Some(4));
    let tsuid = list[0]["tsuid"].as_str().unwrap_or_default().to_string();
    let (status, v) = call(
        &server,
        "GET",
        &format!("/api/uid/tsmeta?tsuid={tsuid}"),
        "",
    )?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v, list[0]);
    assert_eq!(v["lastReceived"], 1356998460);
    let (s, v) = call(
        &server,
        "GET",
        "/api/uid/tsmeta?tsuid=000001000001000099",
        "",
    )?;
    assert_eq!(
        assert_error(s, &v, 404),
        "Could not find Timeseries meta data"
    );
    let (s, v) = call(&server, "GET", "/api/uid/tsmeta?m=nope", "")?;
    assert_eq!(assert_error(s, &v, 404), "Unable to find one of the UIDs");
    let (s, v) = call(&server, "GET", "/api/uid/tsmeta", "")?;
    assert_eq!(assert_error(s, &v, 400), "Missing parameter <code>m</code>");
    let (s, v) = call(&server, "POST", "/api/uid/tsmeta?tsuid=00", "")?;
    assert_error(s, &v, 405);
    Ok(())
}

#[test]
fn uid_rename_changes_the_name() -> anyhow::Result<()> {
    let server = Server::start()?;
    put(&server, &cpu_points())?;
    let (status, v) = call(
        &server,
        "POST",
        "/api/uid/rename",
        r#"{"metric":"sys.mem","name":"sys.memory"}"#,
    )?;
    assert_eq!((status, v), (200, json!({"result":"true"})));
    let (_, v) = call(&server, "GET", "/api/suggest?type=metrics&q=sys.mem", "")?;
    assert_eq!(v, json!(["sys.memory"]));
    let (status, v) = call(&server, "GET", "/api/uid/rename?metric=nope&name=x", "")?;
    assert_eq!(status, 400);
    assert_eq!(v["result"], "false");
    Ok(())
}

#[test]
fn config_and_serializers_describe_the_server() -> anyhow::Result<()> {
    let server = Server::start()?;
    let (status, v) = call(&server, "GET", "/api/config", "")?;
    assert_eq!(status, 200, "{v}");
    let o = v.as_object().cloned().unwrap_or_default();
    assert!(o.values().all(Json::is_string), "{v}");
    // The configured port (the harness asks for 0, an ephemeral one).
    assert_eq!(o.get("tsd.network.port"), Some(&json!("0")));
    assert_eq!(o.get("tsd.network.bind"), Some(&json!("127.0.0.1")));
    let keys: Vec<&String> = o.keys().collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    assert_eq!(o.get("tsd.core.auto_create_metrics"), Some(&json!("true")));
    assert_eq!(o.get("tsd.storage.salt.buckets"), Some(&json!("20")));
    let (status, _) = call(&server, "POST", "/api/config", "")?;
    assert_eq!(status, 200);
    let (s, v) = call(&server, "DELETE", "/api/config", "")?;
    assert_error(s, &v, 405);
    let (status, v) = call(&server, "GET", "/api/serializers", "")?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v[0]["serializer"], "json");
    assert_eq!(
        v[0]["response_content_type"],
        "application/json; charset=UTF-8"
    );
    assert!(v[0]["formatters"].as_array().is_some_and(|f| !f.is_empty()));
    let (s, v) = call(&server, "PUT", "/api/serializers", "")?;
    assert_error(s, &v, 405);
    Ok(())
}

#[test]
fn jsonp_wraps_answers_and_errors_in_the_callback() -> anyhow::Result<()> {
    let server = Server::start()?;
    let (status, body) = server.http("GET", "/api/version?jsonp=callback", b"")?;
    assert_eq!(status, 200, "{body}");
    let inner = body
        .strip_prefix("callback(")
        .and_then(|b| b.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not wrapped: {body}"));
    let v: Json = serde_json::from_str(inner)?;
    assert!(v["version"].is_string(), "{body}");
    // Errors are wrapped too, with their status.
    let (status, body) = server.http("GET", "/api/query?start=1h-ago&m=sum:nope&jsonp=cb", b"")?;
    assert_eq!(status, 400, "{body}");
    assert!(body.starts_with("cb({\"error\":"), "{body}");
    // A callback that is not a plain name is ignored rather than echoed into a script.
    let (status, body) = server.http("GET", "/api/version?jsonp=alert(1)//", b"")?;
    assert_eq!(status, 200);
    assert!(body.starts_with('{'), "{body}");
    Ok(())
}
