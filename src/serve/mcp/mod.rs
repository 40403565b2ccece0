//! `dtx --mcp`: dtx as a Model Context Protocol server for agents (docs/agents.md).
//!
//! The protocol by hand rather than the `rmcp` SDK: dtx needs four JSON-RPC methods over
//! stdio and already has a JSON reader and writer, where the SDK would bring tokio and serde
//! into a program that uses neither. What it follows, from the MCP specification (revision
//! 2025-11-25, modelcontextprotocol.io/specification): the stdio transport (one JSON-RPC 2.0
//! message per line, nothing but messages on stdout, logging on stderr), the lifecycle
//! (`initialize` answered with the version the client asked for when supported, else the
//! newest this server knows; `notifications/initialized`), `ping`, `tools/list` and
//! `tools/call` (tool failures as results with `isError`, an unknown tool as error -32602),
//! `resources/list` and `resources/read`; notifications get no answer, an unknown method
//! error -32601, a line that is not JSON error -32700.
//!
//! The tools run D programs through the engine's session handle (`tools.rs`); nothing here
//! reaches into a source.

mod reports;
mod tools;

use std::io::{BufRead, Write};

use crate::output::json::Json;
pub use tools::{LiveSource, ServerOptions};

/// The protocol revisions this server speaks, newest first.
const VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// A JSON-RPC error.
struct RpcError {
    code: i64,
    message: String,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
        }
    }
}

/// Runs `dtx --mcp [-w]` (`argv` after `--mcp`) on stdin and stdout until stdin closes;
/// `saved_views` and `live` are the command line's (see [`ServerOptions`]).
pub fn main(
    prog: &str,
    argv: &[String],
    saved_views: tools::SavedViews,
    live: tools::LiveSource,
) -> i32 {
    let mut opts = ServerOptions {
        saved_views: Some(saved_views),
        live: Some(live),
        ..ServerOptions::default()
    };
    for a in argv {
        match a.as_str() {
            "-w" => opts.destructive = true,
            other => {
                crate::output::stderr::say(
                    prog,
                    format!("--mcp: unknown option {other} (usage: dtx --mcp [-w])"),
                );
                return 2;
            }
        }
    }
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut server = Server::new(opts);
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        if let Some(reply) = server.handle_line(&line) {
            if writeln!(out, "{}", reply.to_json())
                .and_then(|_| out.flush())
                .is_err()
            {
                break;
            }
        }
    }
    0
}

/// The server's state: whether it was initialised and with which revision.
pub struct Server {
    opts: ServerOptions,
    version: Option<&'static str>,
}

impl Server {
    pub fn new(opts: ServerOptions) -> Self {
        Server {
            opts,
            version: None,
        }
    }

    /// Answers one line of the client's: the reply to send, or `None` (a notification, or a
    /// response the client sent).
    pub fn handle_line(&mut self, line: &str) -> Option<Json> {
        let msg = match crate::output::json::parse(line) {
            Ok(m) => m,
            Err(e) => return Some(error_reply(Json::Null, RpcError::new(-32700, e))),
        };
        if let Json::Array(batch) = &msg {
            // JSON-RPC batches (2025-03-26 only); answered one by one in one array
            let replies: Vec<Json> = batch.iter().filter_map(|m| self.handle(m)).collect();
            return (!replies.is_empty()).then_some(Json::Array(replies));
        }
        self.handle(&msg)
    }

    fn handle(&mut self, msg: &Json) -> Option<Json> {
        let id = msg.get("id").cloned();
        let Some(Json::Str(method)) = msg.get("method") else {
            // a response to a request of ours (we send none), or garbage with an id
            return match (id, msg.get("result").or_else(|| msg.get("error"))) {
                (Some(id), None) => Some(error_reply(
                    id,
                    RpcError::new(-32600, "a request needs a method"),
                )),
                _ => None,
            };
        };
        let params = msg.get("params").cloned().unwrap_or(Json::Object(vec![]));
        let result = self.call(method, &params);
        // notifications are not answered, whatever happened
        let id = id?;
        Some(match result {
            Ok(r) => Json::object([("jsonrpc", Json::str("2.0")), ("id", id), ("result", r)]),
            Err(e) => error_reply(id, e),
        })
    }

    fn call(&mut self, method: &str, params: &Json) -> Result<Json, RpcError> {
        match method {
            "initialize" => {
                let asked = match params.get("protocolVersion") {
                    Some(Json::Str(v)) => v.as_str(),
                    _ => "",
                };
                let v = VERSIONS
                    .iter()
                    .find(|&&v| v == asked)
                    .copied()
                    .unwrap_or(VERSIONS[0]);
                self.version = Some(v);
                Ok(Json::object([
                    ("protocolVersion", Json::str(v)),
                    (
                        "capabilities",
                        Json::object([
                            ("tools", Json::object([("listChanged", Json::Bool(false))])),
                            (
                                "resources",
                                Json::object([
                                    ("subscribe", Json::Bool(false)),
                                    ("listChanged", Json::Bool(false)),
                                ]),
                            ),
                        ]),
                    ),
                    (
                        "serverInfo",
                        Json::object([
                            ("name", Json::str("dtx")),
                            ("version", Json::str(env!("CARGO_PKG_VERSION"))),
                        ]),
                    ),
                    ("instructions", Json::str(tools::INSTRUCTIONS)),
                ]))
            }
            "notifications/initialized" | "notifications/cancelled" => Ok(Json::Null),
            "ping" => Ok(Json::Object(vec![])),
            "tools/list" => Ok(Json::object([("tools", tools::list())])),
            "tools/call" => {
                let Some(Json::Str(name)) = params.get("name") else {
                    return Err(RpcError::new(-32602, "tools/call needs a tool name"));
                };
                let args = params
                    .get("arguments")
                    .cloned()
                    .unwrap_or(Json::Object(vec![]));
                if !tools::NAMES.contains(&name.as_str()) {
                    return Err(RpcError::new(-32602, format!("Unknown tool: {name}")));
                }
                let structured = self.version.is_some_and(|v| v >= "2025-06-18");
                Ok(match tools::call(name, &args, &self.opts) {
                    Ok(j) => tool_result(j, false, structured),
                    Err(e) => tool_result(Json::str(e), true, false),
                })
            }
            "resources/list" => Ok(Json::object([("resources", tools::resources())])),
            "resources/read" => {
                let Some(Json::Str(uri)) = params.get("uri") else {
                    return Err(RpcError::new(-32602, "resources/read needs a uri"));
                };
                tools::read_resource(uri)
                    .map(|c| Json::object([("contents", Json::Array(vec![c]))]))
                    .ok_or_else(|| RpcError::new(-32002, format!("Resource not found: {uri}")))
            }
            other => Err(RpcError::new(-32601, format!("Method not found: {other}"))),
        }
    }
}

/// A `tools/call` result: the answer as text (JSON text for JSON), and from revision
/// 2025-06-18 on, a JSON object also as `structuredContent`.
fn tool_result(answer: Json, is_error: bool, structured: bool) -> Json {
    let text = match &answer {
        Json::Str(s) => s.clone(),
        other => other.to_json(),
    };
    let mut m = vec![
        (
            "content".to_string(),
            Json::Array(vec![Json::object([
                ("type", Json::str("text")),
                ("text", Json::str(text)),
            ])]),
        ),
        ("isError".to_string(), Json::Bool(is_error)),
    ];
    if structured && matches!(answer, Json::Object(_)) {
        m.push(("structuredContent".to_string(), answer));
    }
    Json::Object(m)
}

fn error_reply(id: Json, e: RpcError) -> Json {
    Json::object([
        ("jsonrpc", Json::str("2.0")),
        ("id", id),
        (
            "error",
            Json::object([
                ("code", Json::Int(e.code)),
                ("message", Json::str(e.message)),
            ]),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(s: &mut Server, line: &str) -> Json {
        s.handle_line(line).unwrap()
    }

    #[test]
    fn lifecycle_errors_and_notifications() {
        let mut s = Server::new(ServerOptions::default());
        let r = ask(
            &mut s,
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        );
        let res = r.get("result").unwrap();
        assert_eq!(res.get("protocolVersion"), Some(&Json::str("2025-06-18")));
        // an unknown revision gets the newest
        let r = ask(
            &mut Server::new(ServerOptions::default()),
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}"#,
        );
        assert_eq!(
            r.get("result").and_then(|r| r.get("protocolVersion")),
            Some(&Json::str(VERSIONS[0]))
        );
        assert!(s
            .handle_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .is_none());
        let e = ask(&mut s, r#"{"jsonrpc":"2.0","id":"x","method":"nope"}"#);
        assert_eq!(e.get("id"), Some(&Json::str("x")));
        assert_eq!(
            e.get("error").and_then(|e| e.get("code")),
            Some(&Json::Int(-32601))
        );
        let e = ask(&mut s, "{not json");
        assert_eq!(
            e.get("error").and_then(|e| e.get("code")),
            Some(&Json::Int(-32700))
        );
        let e = ask(
            &mut s,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope"}}"#,
        );
        assert_eq!(
            e.get("error").and_then(|e| e.get("code")),
            Some(&Json::Int(-32602))
        );
        let t = ask(&mut s, r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#);
        let Some(Json::Array(list)) = t.get("result").and_then(|r| r.get("tools")) else {
            panic!("{t:?}")
        };
        for n in tools::NAMES {
            assert!(
                list.iter().any(|x| x.get("name") == Some(&Json::str(*n))),
                "{n}"
            );
        }
        // a compile error is a tool error with the position
        let r = ask(
            &mut s,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run","arguments":{"program":"BEGIN { x = ; }","trace":"demo"}}}"#,
        );
        let res = r.get("result").unwrap();
        assert_eq!(res.get("isError"), Some(&Json::Bool(true)));
        let text = res.to_json();
        assert!(
            text.contains("D_SYNTAX") && text.contains("line 1"),
            "{text}"
        );
    }
}
