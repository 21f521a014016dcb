//! The stdio transport of `wfhost mcp`: JSON-RPC messages one a line, in
//! and out, where every line that comes in is either a message for the
//! server or answered here.
//!
//! rmcp's own line transport drops a line that is not JSON, that nests
//! too deep, or that is too long, without a word: a client that sent a
//! request on such a line waits for its answer forever. Here such a line
//! gets JSON-RPC's answer, with `"id": null` (JSON-RPC 2.0: the id of a
//! request that could not be read is null), and the next line is read as
//! usual:
//!
//! - a line that is not JSON: `-32700` (parse error);
//! - a line that nests arrays and objects deeper than [`MAX_DEPTH`]:
//!   `-32700`, saying so (serde_json would not read it either);
//! - a line longer than [`MAX_LINE_BYTES`]: `-32700`, saying so; the line
//!   is never held whole: once past the limit its bytes are dropped as
//!   they come, up to its newline;
//! - JSON that is not a JSON-RPC message, e.g. an array or a number, or an
//!   object without `jsonrpc: "2.0"`: `-32600` (invalid request), with
//!   the request's id when it has a `method` and a valid `id`.
//!
//! A notification (an object with a `method` and no `id`) is never
//! answered, as JSON-RPC says, even one the server cannot read. Blank
//! lines are skipped.
//!
//! Every line out, rmcp's messages and these answers alike, goes through
//! one writer task, a whole line at a time: they never interleave.

use std::future::Future;
use std::io;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

/// The longest line read, its newline not counted: 16 MiB, as rmcp's own
/// transport.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// How deep arrays and objects may nest in a message: as deep as
/// serde_json reads (it refuses a 128th level).
pub const MAX_DEPTH: usize = 127;

/// JSON-RPC's parse error: the line is not (readable) JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's invalid request: JSON, but not a request.
pub const INVALID_REQUEST: i64 = -32600;

/// How many lines may wait for the writer; then reading waits too.
const WRITER_QUEUE: usize = 64;

/// The line buffer's capacity kept between lines.
const KEPT_CAPACITY: usize = 64 * 1024;

/// How long closing waits for the lines still queued to be written.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// A line for the writer, and whom to tell when it is out.
struct Frame {
    line: Vec<u8>,
    done: Option<oneshot::Sender<io::Result<()>>>,
}

/// The transport: see the module.
pub struct LineTransport<R> {
    read: BufReader<R>,
    /// The line read so far (never more than [`MAX_LINE_BYTES`] and a
    /// newline).
    line: Vec<u8>,
    /// The line being read is too long: its bytes are dropped up to its
    /// newline. Kept here, not in a local: a read can be cancelled.
    discarding: bool,
    /// The input ended.
    ended: bool,
    /// An answer to a bad line, not handed to the writer yet.
    pending: Option<Vec<u8>>,
    writer: Option<mpsc::Sender<Frame>>,
    writer_task: Option<tokio::task::JoinHandle<()>>,
}

/// How reading one line went.
enum Read {
    /// A whole line (up to its newline, or to the end of the input) is in
    /// `line`.
    Line,
    /// The line is over [`MAX_LINE_BYTES`].
    TooLong,
    /// The input ended (after the last line).
    Ended,
    Failed(io::Error),
}

impl<R: AsyncRead + Unpin + Send> LineTransport<R> {
    /// Read messages from `read`, write to `write`. Starts the writer
    /// task: call it inside a tokio runtime.
    pub fn new<W>(read: R, write: W) -> Self
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(WRITER_QUEUE);
        LineTransport {
            read: BufReader::with_capacity(64 * 1024, read),
            line: Vec::new(),
            discarding: false,
            ended: false,
            pending: None,
            writer: Some(tx),
            writer_task: Some(tokio::spawn(write_lines(write, rx))),
        }
    }

    /// Read up to the next newline without ever holding more than
    /// [`MAX_LINE_BYTES`] of a line. Cancel-safe: what was read stays in
    /// `self.line` (or was dropped, for a line too long) for the next call.
    async fn read_line(&mut self) -> Read {
        loop {
            let available = match self.read.fill_buf().await {
                Ok(available) => available,
                Err(e) => return Read::Failed(e),
            };
            if available.is_empty() {
                return match (self.discarding, self.line.is_empty()) {
                    // A last line without a newline is a line too.
                    (false, false) => Read::Line,
                    _ => Read::Ended,
                };
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            let content = newline.unwrap_or(take);
            let mut outcome = None;
            if self.discarding {
                self.discarding = newline.is_none();
            } else if self.line.len() + content > MAX_LINE_BYTES {
                self.line.clear();
                self.discarding = newline.is_none();
                outcome = Some(Read::TooLong);
            } else {
                self.line.extend_from_slice(&available[..take]);
                if newline.is_some() {
                    outcome = Some(Read::Line);
                }
            }
            self.read.consume(take);
            if let Some(outcome) = outcome {
                return outcome;
            }
        }
    }
}

/// What to do with a line.
#[derive(Debug)]
pub enum Line {
    /// A message for the server.
    Message(Box<ClientJsonRpcMessage>),
    /// Not one: this answer (a JSON-RPC error, newline included) goes back.
    Answer(Vec<u8>),
    /// Nothing: a blank line, or a notification the server cannot read.
    Skip,
}

/// A JSON-RPC error response line.
pub fn error_line(code: i64, id: Value, message: &str, data: Option<Value>) -> Vec<u8> {
    let mut error = json!({ "code": code, "message": message });
    if let Some(data) = data {
        error["data"] = data;
    }
    let mut line = serde_json::to_vec(&json!({ "jsonrpc": "2.0", "id": id, "error": error }))
        .expect("a JSON value serializes");
    line.push(b'\n');
    line
}

/// The answer to a line longer than [`MAX_LINE_BYTES`].
fn too_long() -> Vec<u8> {
    error_line(
        PARSE_ERROR,
        Value::Null,
        &format!(
            "Parse error: the line is longer than {MAX_LINE_BYTES} bytes (16 MiB), the most wfhost mcp reads; it was dropped"
        ),
        Some(json!({ "maxLineBytes": MAX_LINE_BYTES })),
    )
}

/// Whether arrays and objects in `text` nest deeper than `max` (strings
/// skipped; `text` need not be valid JSON).
fn nests_deeper_than(text: &[u8], max: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in text {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// What `line` (a whole line, its newline included or not) is.
pub fn classify(line: &[u8]) -> Line {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // RFC 8259 lets a reader ignore a byte order mark.
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Line::Skip;
    }
    if nests_deeper_than(line, MAX_DEPTH) {
        return Line::Answer(error_line(
            PARSE_ERROR,
            Value::Null,
            &format!(
                "Parse error: the message nests arrays and objects deeper than {MAX_DEPTH} levels, the most wfhost mcp reads"
            ),
            Some(json!({ "maxDepth": MAX_DEPTH })),
        ));
    }
    let error = match serde_json::from_slice::<ClientJsonRpcMessage>(line) {
        Ok(message) => return Line::Message(Box::new(message)),
        Err(error) => error,
    };
    // Not a message: JSON at all?
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => {
            return Line::Answer(error_line(
                PARSE_ERROR,
                Value::Null,
                &format!("Parse error: the line is not JSON ({e})"),
                None,
            ));
        }
    };
    let Value::Object(object) = value else {
        let kind = match value {
            Value::Array(_) => "an array (batches are not taken)",
            Value::String(_) => "a string",
            Value::Number(_) => "a number",
            Value::Bool(_) => "a boolean",
            _ => "null",
        };
        return Line::Answer(error_line(
            INVALID_REQUEST,
            Value::Null,
            &format!("Invalid Request: a JSON-RPC message is an object, not {kind}"),
            None,
        ));
    };
    let method = object.get("method");
    if method.is_some_and(Value::is_string) && !object.contains_key("id") {
        // A notification: never answered.
        return Line::Skip;
    }
    // A request's id, when it can be read.
    let id = match object.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) if method.is_some() => id.clone(),
        _ => Value::Null,
    };
    Line::Answer(error_line(
        INVALID_REQUEST,
        id,
        &format!("Invalid Request: not a JSON-RPC 2.0 message the server takes ({error})"),
        None,
    ))
}

/// Write each frame's line whole, in the order they come; after a failed
/// write the later ones fail too.
async fn write_lines<W: AsyncWrite + Unpin>(mut out: W, mut frames: mpsc::Receiver<Frame>) {
    let mut broken: Option<io::ErrorKind> = None;
    while let Some(frame) = frames.recv().await {
        let result = match broken {
            Some(kind) => Err(io::Error::new(kind, "the output is closed")),
            None => {
                let written = async {
                    out.write_all(&frame.line).await?;
                    out.flush().await
                }
                .await;
                if let Err(e) = &written {
                    broken = Some(e.kind());
                }
                written
            }
        };
        if let Some(done) = frame.done {
            let _ = done.send(result);
        }
    }
    let _ = out.shutdown().await;
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the transport is closed")
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        let line = serde_json::to_vec(&item);
        async move {
            let mut line = line.map_err(io::Error::other)?;
            line.push(b'\n');
            let writer = writer.ok_or_else(closed)?;
            let (done, written) = oneshot::channel();
            writer
                .send(Frame {
                    line,
                    done: Some(done),
                })
                .await
                .map_err(|_| closed())?;
            drop(writer);
            written.await.unwrap_or_else(|_| Err(closed()))
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            if self.pending.is_some() {
                // Reserve, then send: cancelled while waiting, the answer
                // stays pending.
                let permit = self.writer.as_ref()?.reserve().await.ok()?;
                let line = self.pending.take().expect("checked");
                permit.send(Frame { line, done: None });
            }
            if self.ended {
                return None;
            }
            match self.read_line().await {
                Read::Line => {
                    let line = classify(&self.line);
                    self.line.clear();
                    // A long line's buffer is not kept for short ones.
                    self.line.shrink_to(KEPT_CAPACITY);
                    match line {
                        Line::Message(message) => return Some(*message),
                        Line::Answer(answer) => self.pending = Some(answer),
                        Line::Skip => {}
                    }
                }
                Read::TooLong => {
                    self.line.shrink_to(KEPT_CAPACITY);
                    self.pending = Some(too_long());
                }
                Read::Ended => self.ended = true,
                Read::Failed(e) => {
                    tracing::warn!("wfhost mcp: cannot read the input: {e}");
                    self.ended = true;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let writer = self.writer.take();
        let pending = self.pending.take();
        let task = self.writer_task.take();
        let _ = tokio::time::timeout(CLOSE_WAIT, async move {
            if let (Some(writer), Some(line)) = (&writer, pending) {
                let _ = writer.send(Frame { line, done: None }).await;
            }
            drop(writer);
            // The writer ends once every line queued is out.
            if let Some(task) = task {
                let _ = task.await;
            }
        })
        .await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn answer(line: &[u8]) -> Value {
        match classify(line) {
            Line::Answer(bytes) => {
                assert!(bytes.ends_with(b"\n") && !bytes[..bytes.len() - 1].contains(&b'\n'));
                serde_json::from_slice(&bytes).unwrap()
            }
            other => panic!("{}: {other:?}", String::from_utf8_lossy(line)),
        }
    }

    fn nested(depth: usize) -> String {
        // A request whose params nest to `depth` levels in all.
        let inner = format!("{}{}", "[".repeat(depth - 3), "]".repeat(depth - 3));
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"workflow_list","arguments":{{"x":{inner}}}}}}}"#
        )
    }

    #[test]
    fn bad_lines_get_json_rpc_errors_with_a_null_id() {
        for (line, code, says) in [
            (&b"garbage"[..], PARSE_ERROR, "not JSON"),
            (b"{\"jsonrpc\":\"2.0\",\"id\":1,", PARSE_ERROR, "not JSON"),
            (b"\xff\xfe", PARSE_ERROR, "not JSON"),
            (b"[1,2]", INVALID_REQUEST, "not an array"),
            (b"[]", INVALID_REQUEST, "not an array"),
            (b"42", INVALID_REQUEST, "not a number"),
            (b"\"initialize\"", INVALID_REQUEST, "not a string"),
            (b"null", INVALID_REQUEST, "not null"),
            (b"{}", INVALID_REQUEST, "Invalid Request"),
            (
                b"{\"id\":1,\"result\":5}",
                INVALID_REQUEST,
                "Invalid Request",
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}",
                INVALID_REQUEST,
                "Invalid Request",
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"method\":1}",
                INVALID_REQUEST,
                "Invalid Request",
            ),
        ] {
            let a = answer(line);
            assert_eq!(a["jsonrpc"], "2.0", "{a}");
            assert_eq!(a["id"], Value::Null, "{a}");
            assert!(a.as_object().unwrap().contains_key("id"), "{a}");
            assert_eq!(a["error"]["code"], code, "{a}");
            let message = a["error"]["message"].as_str().unwrap();
            assert!(
                message.contains(says),
                "{}: {message}",
                String::from_utf8_lossy(line)
            );
        }
        // A request whose id can be read is answered by it.
        let a = answer(b"{\"id\":5,\"method\":\"ping\"}");
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (json!(5), json!(INVALID_REQUEST))
        );
    }

    #[test]
    fn depth_is_refused_past_the_limit_and_read_up_to_it() {
        let a = answer("[".repeat(10_000).as_bytes());
        assert_eq!(a["error"]["code"], PARSE_ERROR);
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains("deeper than 127 levels"),
            "{a}"
        );
        assert_eq!(a["error"]["data"]["maxDepth"], 127);
        assert!(matches!(
            classify(nested(MAX_DEPTH).as_bytes()),
            Line::Message(_)
        ));
        let a = answer(nested(MAX_DEPTH + 1).as_bytes());
        assert_eq!(a["error"]["code"], PARSE_ERROR, "{a}");
        // Brackets in strings do not count.
        let quoted = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"_meta":{{"x":"{}"}}}}}}"#,
            "[{".repeat(500)
        );
        assert!(matches!(classify(quoted.as_bytes()), Line::Message(_)));
        // serde_json itself reads no deeper.
        let value = |d: usize| {
            serde_json::from_str::<Value>(&format!("{}{}", "[".repeat(d), "]".repeat(d)))
        };
        assert!(value(MAX_DEPTH).is_ok());
        assert!(value(MAX_DEPTH + 1).is_err());
    }

    #[test]
    fn messages_blank_lines_and_notifications() {
        let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        assert!(matches!(classify(init), Line::Message(_)));
        let mut framed = b"\xEF\xBB\xBF".to_vec();
        framed.extend_from_slice(init);
        framed.extend_from_slice(b"\r\n");
        assert!(matches!(classify(&framed), Line::Message(_)));
        for skipped in [
            &b""[..],
            b"\n",
            b"  \t\r\n",
            br#"{"jsonrpc":"2.0","method":"$/whatever","params":5}"#,
        ] {
            assert!(
                matches!(classify(skipped), Line::Skip),
                "{}",
                String::from_utf8_lossy(skipped)
            );
        }
    }

    /// The transport on a pipe: bad lines are answered, in order, and the
    /// good ones reach the server.
    #[tokio::test]
    async fn every_line_is_answered_or_delivered() {
        let (mut client, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, mut answers) = tokio::io::duplex(1 << 20);
        let mut transport = LineTransport::new(server_in, server_out);
        let ping = br#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#;
        let feeder = tokio::spawn(async move {
            client.write_all(b"garbage\n").await.unwrap();
            // Exactly the limit: read (as the padded message it is).
            let mut exact = ping.to_vec();
            exact.resize(MAX_LINE_BYTES, b' ');
            exact.push(b'\n');
            client.write_all(&exact).await.unwrap();
            // One byte over: dropped as it comes.
            let mut over = vec![b'x'; MAX_LINE_BYTES + 1];
            over.push(b'\n');
            client.write_all(&over).await.unwrap();
            client.write_all(b"[1]\n").await.unwrap();
            client.write_all(ping).await.unwrap();
            client.write_all(b"\n").await.unwrap();
            // A last line without its newline is read too.
            client.write_all(b"nope").await.unwrap();
        });
        for _ in 0..2 {
            match transport.receive().await {
                Some(ClientJsonRpcMessage::Request(r)) => assert_eq!(r.id.to_string(), "9"),
                other => panic!("{other:?}"),
            }
        }
        assert!(transport.receive().await.is_none());
        feeder.await.unwrap();
        // A server answer goes through the same writer.
        transport
            .send(ServerJsonRpcMessage::response(
                rmcp::model::ServerResult::EmptyResult(rmcp::model::EmptyResult {}),
                rmcp::model::NumberOrString::Number(9),
            ))
            .await
            .unwrap();
        transport.close().await.unwrap();
        let mut out = String::new();
        answers.read_to_string(&mut out).await.unwrap();
        let lines: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let codes: Vec<&Value> = lines.iter().map(|l| &l["error"]["code"]).collect();
        assert_eq!(
            codes,
            [
                &json!(PARSE_ERROR),
                &json!(PARSE_ERROR),
                &json!(INVALID_REQUEST),
                &json!(PARSE_ERROR),
                &Value::Null
            ],
            "{out}"
        );
        assert!(
            lines[1]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("longer than 16777216 bytes")
        );
        assert_eq!(lines[1]["error"]["data"]["maxLineBytes"], MAX_LINE_BYTES);
        assert!(lines[..4].iter().all(|l| l["id"].is_null()));
        assert_eq!(lines[4]["id"], 9);
    }
}
