//! A line filter in front of `lmcp serve`'s stdio transport: a line that is not JSON gets the
//! JSON-RPC parse error (-32700, id null) instead of silence, and no line may be longer than a
//! bound. rmcp 3.11's stdio transport drops unparsable lines without a reply (and would buffer a
//! line of any length); this is the wrapper that fills that gap until it answers them itself.
//!
//! One task reads the client's lines and passes the good ones to rmcp through a pipe; one task
//! owns stdout and writes whole lines, rmcp's and the parse errors, so they never interleave.

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};

/// Longest request line accepted (the same bound as inputs read from files).
pub const MAX_LINE: usize = 16 << 20;

/// Puts the filter between the client's `input`/`output` and rmcp; returns the pair rmcp reads
/// from and writes to.
pub fn filtered<R, W>(input: R, output: W) -> (DuplexStream, DuplexStream)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (mut to_rmcp, rmcp_reads) = tokio::io::duplex(1 << 16);
    let (rmcp_writes, from_rmcp) = tokio::io::duplex(1 << 16);
    let (errors, mut error_lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let mut input = BufReader::new(input);
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = read_line_bounded(&mut input, &mut line).await;
            let text = match read {
                Ok(0) => break, // the client left
                Ok(_) => String::from_utf8_lossy(&line).trim().to_string(),
                Err(too_long) => {
                    let _ = errors.send(parse_error(&too_long));
                    continue;
                }
            };
            if text.is_empty() {
                continue;
            }
            match serde_json::from_str::<Value>(&text) {
                Ok(request) if bad_params(&request).is_some() => {
                    let why = bad_params(&request).unwrap_or_default();
                    let _ = errors.send(invalid_params(&request["id"], &why));
                }
                Ok(_) => {
                    let mut bytes = text.into_bytes();
                    bytes.push(b'\n');
                    if to_rmcp.write_all(&bytes).await.is_err() {
                        break;
                    }
                }
                Err(e) => {
                    let _ = errors.send(parse_error(&e.to_string()));
                }
            }
        }
        let _ = to_rmcp.shutdown().await;
    });
    tokio::spawn(async move {
        let mut output = output;
        let mut rmcp_lines = BufReader::new(from_rmcp).lines();
        let mut rmcp_open = true;
        loop {
            let line = tokio::select! {
                l = rmcp_lines.next_line(), if rmcp_open => match l {
                    Ok(Some(l)) => l,
                    _ => {
                        rmcp_open = false;
                        continue;
                    }
                },
                e = error_lines.recv() => match e {
                    Some(e) => e,
                    None if rmcp_open => continue,
                    None => break,
                },
                else => break,
            };
            let mut bytes = line.into_bytes();
            bytes.push(b'\n');
            if output.write_all(&bytes).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    });
    (rmcp_reads, rmcp_writes)
}

/// Why a request's params cannot be taken, when rmcp would answer the wrong error: it reads a
/// `tools/call` whose params do not fit as an unknown method (-32601), and params that are not
/// an object as an invalid request without its id (rmcp 3.11). Checked here, the client gets
/// -32602 with the reason and its id.
fn bad_params(request: &Value) -> Option<String> {
    let id = request.get("id")?;
    if id.is_null() {
        return None;
    }
    let method = request.get("method")?.as_str()?;
    let params = request.get("params");
    match params {
        // absent or null: rmcp answers as it should (tools/call is checked below)
        None | Some(Value::Null) => {}
        Some(Value::Object(p)) => {
            if p.get("_meta").is_some_and(|m| !m.is_object()) {
                return Some("params._meta must be an object".into());
            }
        }
        Some(_) => return Some("params must be an object".into()),
    }
    if method == "tools/call" {
        let p = params.and_then(Value::as_object);
        match p.and_then(|p| p.get("name")) {
            Some(Value::String(_)) => {}
            Some(_) => return Some("tools/call: params.name must be a string".into()),
            None => return Some("tools/call needs params.name, the tool's name".into()),
        }
        if p.and_then(|p| p.get("arguments"))
            .is_some_and(|a| !a.is_object() && !a.is_null())
        {
            return Some("tools/call: params.arguments must be an object".into());
        }
    }
    None
}

/// The JSON-RPC invalid-params error for request `id`.
fn invalid_params(id: &Value, why: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": format!("Invalid params: {why}")}})
        .to_string()
}

/// The JSON-RPC parse error for a line that could not be read as JSON.
fn parse_error(why: &str) -> String {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": format!("Parse error: {why}")}})
        .to_string()
}

/// Reads one line of at most [`MAX_LINE`] bytes into `buf`; the number of bytes read (0 at the
/// end), or why the line was refused (the rest of it is skipped).
async fn read_line_bounded<R: AsyncRead + Unpin>(
    input: &mut BufReader<R>,
    buf: &mut Vec<u8>,
) -> std::result::Result<usize, String> {
    let mut total = 0usize;
    let mut too_long = false;
    loop {
        let chunk = match input.fill_buf().await {
            Ok(c) => c,
            Err(e) => {
                return if total == 0 {
                    Ok(0)
                } else {
                    Err(e.to_string())
                };
            }
        };
        if chunk.is_empty() {
            return if too_long {
                Err(format!("a line is longer than {MAX_LINE} bytes"))
            } else {
                Ok(total)
            };
        }
        let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + take > MAX_LINE {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        total += take;
        input.consume(take);
        if done {
            return if too_long {
                Err(format!("a line is longer than {MAX_LINE} bytes"))
            } else {
                Ok(total)
            };
        }
    }
}
