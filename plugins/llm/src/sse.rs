//! Server-sent events, as both model APIs stream them: `event:` and
//! `data:` lines, an empty line ending each event.

/// One event: its name (empty when it has none) and its data lines joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub name: String,
    pub data: String,
}

/// The events of `text`, comments and other fields ignored; an event with
/// no data is dropped.
pub fn events(text: &str) -> Vec<Event> {
    let mut out = Vec::new();
    let (mut name, mut data): (String, Vec<&str>) = (String::new(), Vec::new());
    for line in text.lines().chain(std::iter::once("")) {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if !data.is_empty() {
                out.push(Event {
                    name: std::mem::take(&mut name),
                    data: data.join("\n"),
                });
            }
            name.clear();
            data.clear();
        } else if let Some(rest) = line.strip_prefix("data:") {
            data.push(rest.strip_prefix(' ').unwrap_or(rest));
        } else if let Some(rest) = line.strip_prefix("event:") {
            name = rest.trim().to_string();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_on_blank_lines_and_join_their_data() {
        let text = ": comment\r\nevent: a\r\ndata: 1\r\ndata: 2\r\n\r\ndata:x\n\nevent: empty\n\n";
        assert_eq!(
            events(text),
            [
                Event {
                    name: "a".into(),
                    data: "1\n2".into()
                },
                Event {
                    name: String::new(),
                    data: "x".into()
                }
            ]
        );
    }
}
