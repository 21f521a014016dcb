//! A worker that tries to open a TCP connection, so its component imports
//! `wasi:sockets`. The host must refuse to load it.

use wfhost_sdk::prelude::*;

pub struct NetProbe;

impl Worker for NetProbe {
    fn run(_ctx: BlockContext, mut payload: Payload) -> Result<WorkerOutput, PluginError> {
        let outcome = match std::net::TcpStream::connect("127.0.0.1:9") {
            Ok(_) => "connected".to_string(),
            Err(e) => format!("err: {e}"),
        };
        payload.push(segment("NET", outcome));
        Ok(WorkerOutput::new(payload, "SIGNAL:SUCCESS"))
    }
}

export_worker!(NetProbe);
