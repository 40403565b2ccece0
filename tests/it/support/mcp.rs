//! `dtx --mcp` spoken to by hand over stdio, where Python's MCP SDK is not at hand (the
//! Windows runner) and for live runs: the tests of tests/it/mcp.rs drive it with the SDK.

// shared by two test binaries (tests/it and tests/alone); each uses a part
#![allow(dead_code)]

use dtx::output::json::{parse, Json};

/// The answers (`result`s) of `calls`, tool calls made by hand over `dtx --mcp`'s stdio
/// (initialize, the initialized notification, then one `tools/call` per entry), each the
/// tool's JSON answer and whether it was an error. For where Python's SDK is not at hand
/// (the Windows runner) and for live runs.
pub fn tool_calls_by_hand(calls: &[(&str, Json)]) -> Vec<(Json, bool)> {
    tool_calls_of(crate::support::cli::Dtx::new(&["--mcp"]), calls)
}

/// [`tool_calls_by_hand`] of a server started as `server` (a `dtx --mcp` run as another
/// user, say).
pub fn tool_calls_of(
    server: crate::support::cli::Dtx,
    calls: &[(&str, Json)],
) -> Vec<(Json, bool)> {
    let mut input = String::new();
    let init = Json::object([
        ("jsonrpc", Json::str("2.0")),
        ("id", Json::UInt(0)),
        ("method", Json::str("initialize")),
        (
            "params",
            Json::object([
                ("protocolVersion", Json::str("2025-11-25")),
                ("capabilities", Json::object(Vec::<(String, Json)>::new())),
                (
                    "clientInfo",
                    Json::object([("name", Json::str("dtx-test")), ("version", Json::str("1"))]),
                ),
            ]),
        ),
    ]);
    input.push_str(&init.to_json());
    input.push('\n');
    input.push_str("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    for (i, (name, args)) in calls.iter().enumerate() {
        let call = Json::object([
            ("jsonrpc", Json::str("2.0")),
            ("id", Json::UInt(i as u64 + 1)),
            ("method", Json::str("tools/call")),
            (
                "params",
                Json::object([("name", Json::str(*name)), ("arguments", args.clone())]),
            ),
        ]);
        input.push_str(&call.to_json());
        input.push('\n');
    }
    let out = server
        .stdin(input)
        .timeout(std::time::Duration::from_secs(120))
        .output();
    let (so, se) = crate::support::cli::text(&out);
    assert!(out.status.success(), "dtx --mcp failed: {se}\n{so}");
    let mut answers = vec![None; calls.len()];
    for line in so.lines() {
        let msg = parse(line).unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line}"));
        let Some(id) = msg.get("id").map(|i| int(Some(i))) else {
            continue;
        };
        if id < 1 {
            continue;
        }
        let result = msg
            .get("result")
            .unwrap_or_else(|| panic!("no result: {line}"));
        let is_error = result.get("isError") == Some(&Json::Bool(true));
        let text = list(result, "content")
            .first()
            .map(|c| s(c, "text").to_string())
            .unwrap_or_default();
        let answer = if is_error {
            Json::str(text)
        } else {
            parse(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
        };
        if let Some(slot) = answers.get_mut(id as usize - 1) {
            *slot = Some((answer, is_error));
        }
    }
    answers
        .into_iter()
        .enumerate()
        .map(|(i, a)| a.unwrap_or_else(|| panic!("no answer to call {}: {so}\n{se}", i + 1)))
        .collect()
}

/// The string member `k` of `j`.
pub fn s<'a>(j: &'a Json, k: &str) -> &'a str {
    match j.get(k) {
        Some(Json::Str(s)) => s,
        other => panic!("{k}: {other:?}"),
    }
}

/// The array member `k` of `j`.
pub fn list<'a>(j: &'a Json, k: &str) -> &'a [Json] {
    match j.get(k) {
        Some(Json::Array(a)) => a,
        other => panic!("{k}: {other:?}"),
    }
}

/// An integer.
pub fn int(j: Option<&Json>) -> i64 {
    match j {
        Some(Json::Int(i)) => *i,
        Some(Json::UInt(u)) => *u as i64,
        other => panic!("not an integer: {other:?}"),
    }
}
