//! Endpoints forwarded into a container that has no network: how a
//! containerised agent reaches its model, and nothing else.
//!
//! A container runs without a network (loopback only). For each forwarded
//! endpoint `host:port`, the host opens a listening socket on
//! `127.0.0.1:port` *inside the container's network namespace* (a thread
//! joins it, binds, and leaves; the socket stays there) and relays every
//! connection to `host:port` as the host reaches it. A name is also mapped
//! to `127.0.0.1` in the container's `/etc/hosts`, so a CLI that talks to
//! `https://api.anthropic.com` keeps its URL (TLS passes through
//! untouched). Nothing else leaves the container. Joining another
//! network namespace takes `CAP_SYS_ADMIN` (root) and a local Docker
//! engine; without them the block fails before its command runs, saying
//! so.

use std::io;
use std::os::fd::AsRawFd;

use tokio::task::JoinHandle;

/// One endpoint to forward: `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Forward {
    pub host: String,
    pub port: u16,
}

impl Forward {
    /// `host:port`, where `host` is a DNS name or a loopback IPv4 address
    /// (`127.x.x.x`: an address the container can have) and `port`
    /// 1–65535; an error says what is wrong.
    pub fn parse(text: &str) -> Result<Forward, String> {
        let bad = |why: &str| format!("forward `{text}`: {why}");
        let (host, port) = text
            .rsplit_once(':')
            .ok_or_else(|| bad("expected host:port, e.g. api.anthropic.com:443"))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| bad("the port is not a number from 1 to 65535"))?;
        if let Ok(ip) = host.parse::<std::net::Ipv4Addr>() {
            if !ip.is_loopback() {
                return Err(bad(
                    "an IP address must be a loopback one (127.x.x.x); name the host instead",
                ));
            }
        } else {
            let name_ok = !host.is_empty()
                && host.len() <= 253
                && !host.starts_with(['-', '.'])
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
            if !name_ok {
                return Err(bad("the host is not a DNS name or a loopback IPv4 address"));
            }
        }
        Ok(Forward {
            host: host.to_string(),
            port,
        })
    }

    /// The host of a URL's authority, as a forward (`http://h:p/...`,
    /// default ports 80 and 443), if it is one.
    pub fn of_url(url: &str) -> Option<Forward> {
        let (scheme, rest) = url.trim().split_once("://")?;
        let authority = rest.split(['/', '?', '#']).next()?;
        let authority = authority.rsplit('@').next()?;
        let with_port = match authority.rsplit_once(':') {
            Some((_, p)) if p.bytes().all(|b| b.is_ascii_digit()) => authority.to_string(),
            _ => match scheme {
                "http" => format!("{authority}:80"),
                "https" => format!("{authority}:443"),
                _ => return None,
            },
        };
        Forward::parse(&with_port).ok()
    }

    /// The `/etc/hosts` line the container gets for a name (`localhost`
    /// is there already).
    pub fn hosts_entry(&self) -> Option<String> {
        let name = self.host.parse::<std::net::Ipv4Addr>().is_err() && self.host != "localhost";
        name.then(|| format!("{}:127.0.0.1", self.host))
    }
}

/// The forwards a block's `config.executor.container.forward` lists (none
/// when absent), or why they are not ones.
pub fn from_config(config: &serde_json::Value) -> Result<Vec<Forward>, String> {
    let Some(list) = config
        .get("executor")
        .and_then(|e| e.get("container"))
        .and_then(|c| c.get("forward"))
    else {
        return Ok(Vec::new());
    };
    let items = list
        .as_array()
        .ok_or_else(|| format!("`forward` is {list}, not a list of host:port"))?;
    let forwards = items
        .iter()
        .map(|item| match item.as_str() {
            Some(text) => Forward::parse(text),
            None => Err(format!("forward {item} is not a host:port text")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    check_ports(&forwards)?;
    Ok(forwards)
}

/// Check a set of forwards: no port twice (each is `127.0.0.1:port` in
/// the container).
pub fn check_ports(forwards: &[Forward]) -> Result<(), String> {
    let mut seen = std::collections::BTreeMap::new();
    for f in forwards {
        if let Some(other) = seen.insert(f.port, &f.host)
            && *other != f.host
        {
            return Err(format!(
                "forwards `{other}:{}` and `{}:{}` need the same port in the container",
                f.port, f.host, f.port
            ));
        }
    }
    Ok(())
}

/// The relays of one container; stopped when dropped.
pub struct Relays(Vec<JoinHandle<()>>);

impl Drop for Relays {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Start relaying `forwards` into the network namespace of the process
/// `pid` (a container's init).
pub fn start(pid: i64, forwards: &[Forward]) -> io::Result<Relays> {
    let mut tasks = Vec::new();
    let mut ports = std::collections::BTreeSet::new();
    for forward in forwards {
        if !ports.insert(forward.port) {
            continue;
        }
        let listener = listen_in(pid, forward.port)?;
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let upstream = format!("{}:{}", forward.host, forward.port);
        tasks.push(tokio::spawn(relay(listener, upstream)));
    }
    Ok(Relays(tasks))
}

/// A listening socket on `127.0.0.1:port` in the network namespace of
/// `pid`, made by a thread that joins it (the socket stays there).
fn listen_in(pid: i64, port: u16) -> io::Result<std::net::TcpListener> {
    let target = std::fs::File::open(format!("/proc/{pid}/ns/net")).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot reach the container's network (/proc/{pid}/ns/net): {e}"),
        )
    })?;
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // SAFETY: setns on this thread only, with a namespace file
                // it holds open; the thread ends right after.
                if unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    let e = io::Error::last_os_error();
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot join the container's network to forward into it (it takes root): {e}"),
                    ));
                }
                std::net::TcpListener::bind(("127.0.0.1", port))
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the forwarding thread panicked")))
    })
}

async fn relay(listener: tokio::net::TcpListener, upstream: String) {
    loop {
        let Ok((mut inside, _)) = listener.accept().await else {
            return;
        };
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let Ok(mut outside) = tokio::net::TcpStream::connect(&upstream).await else {
                // The client sees the connection closed, as if refused.
                return;
            };
            let _ = tokio::io::copy_bidirectional(&mut inside, &mut outside).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwards_are_host_and_port() {
        assert_eq!(
            Forward::parse("api.anthropic.com:443").unwrap(),
            Forward {
                host: "api.anthropic.com".into(),
                port: 443
            }
        );
        assert_eq!(Forward::parse("127.0.0.1:8080").unwrap().port, 8080);
        for (bad, why) in [
            ("api.anthropic.com", "expected host:port"),
            ("h:0", "the port"),
            ("h:70000", "the port"),
            ("10.0.0.5:80", "loopback"),
            ("-h:80", "not a DNS name"),
            ("a b:80", "not a DNS name"),
            ("[::1]:80", "not a DNS name"),
            (":80", "not a DNS name"),
        ] {
            let e = Forward::parse(bad).unwrap_err();
            assert!(e.contains(why) && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn urls_name_their_endpoint() {
        let f = |u: &str| Forward::of_url(u).map(|f| format!("{}:{}", f.host, f.port));
        assert_eq!(
            f("http://127.0.0.1:4010").as_deref(),
            Some("127.0.0.1:4010")
        );
        assert_eq!(
            f("https://api.openai.com/v1").as_deref(),
            Some("api.openai.com:443")
        );
        assert_eq!(
            f("http://u:p@models.internal/v1").as_deref(),
            Some("models.internal:80")
        );
        // The host's localhost, where the container's is.
        assert_eq!(
            f("http://localhost:4010").as_deref(),
            Some("localhost:4010")
        );
        assert_eq!(
            Forward::of_url("http://localhost:1").unwrap().hosts_entry(),
            None
        );
        assert_eq!(f("ftp://x"), None);
        assert_eq!(f("not a url"), None);
    }

    #[test]
    fn a_blocks_config_lists_its_forwards() {
        let c = |v: serde_json::Value| from_config(&v);
        assert_eq!(c(serde_json::json!({})).unwrap(), []);
        assert_eq!(
            c(serde_json::json!({"executor": {"container": {"image": "x", "forward": ["a.com:443"]}}}))
                .unwrap()
                .len(),
            1
        );
        for bad in [
            serde_json::json!({"executor": {"container": {"forward": "a.com:443"}}}),
            serde_json::json!({"executor": {"container": {"forward": [443]}}}),
            serde_json::json!({"executor": {"container": {"forward": ["a.com"]}}}),
        ] {
            assert!(c(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_get_a_hosts_line_and_ports_are_not_shared() {
        assert_eq!(
            Forward::parse("api.x.com:443")
                .unwrap()
                .hosts_entry()
                .as_deref(),
            Some("api.x.com:127.0.0.1")
        );
        assert_eq!(Forward::parse("127.0.0.1:1").unwrap().hosts_entry(), None);
        let a = Forward::parse("a.com:443").unwrap();
        let b = Forward::parse("b.com:443").unwrap();
        assert!(check_ports(&[a.clone(), a.clone()]).is_ok());
        let e = check_ports(&[a, b]).unwrap_err();
        assert!(e.contains("same port"), "{e}");
    }
}
