//! A test server that picks its own port (`:0`) and says which in a line of its output: the line
//! read from the server's pipe, so that no test hands a server a port found free and released,
//! which another test's listener could take first.

use std::io::{BufRead, BufReader, Read};
use std::process::Child;
use std::sync::mpsc::RecvTimeoutError;

use crate::pace::Pace;

/// What `parse` makes of the rest of the first line of `output` that holds `marker`, within
/// [`Pace::daemon_wait`]; `child` (the server writing `output`) is killed and the test fails when
/// no such line comes, the server ends first, or `parse` finds no address in it. A thread reads
/// `output` to its end, so the server never blocks on a full pipe.
pub fn announced<T>(
    child: &mut Child,
    what: &str,
    output: impl Read + Send + 'static,
    marker: &'static str,
    parse: impl Fn(&str) -> Option<T>,
) -> T {
    let (sender, said) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines().map_while(Result::ok) {
            if let Some(rest) = line.split(marker).nth(1) {
                let _ = sender.send(rest.to_string());
            }
        }
    });
    let patience = Pace::measured().daemon_wait();
    let said = said.recv_timeout(patience);
    if let Some(parsed) = said.as_deref().ok().and_then(&parse) {
        return parsed;
    }
    let _ = child.kill();
    let ended = child.wait();
    match said {
        Ok(rest) => panic!("{what} said it listens on something that is no address: {rest:?}"),
        Err(RecvTimeoutError::Timeout) => panic!("{what} did not say where it listens within {patience:?}"),
        Err(RecvTimeoutError::Disconnected) => panic!("{what} ended ({ended:?}) before it listened"),
    }
}
