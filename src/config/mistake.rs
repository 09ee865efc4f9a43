//! One mistake in a config file, located, and how a list of them is printed.
//!
//! Owns: [`Mistake`] (the key, its line and column in the file, and what is wrong in words) and
//! [`Mistakes`], the list `check-config` and `run` print, one mistake a line
//! (`/etc/jetson-detectd/config.toml:12:1: `mqtt.pasword_file`: no such key; did you mean …`), as
//! compilers do, so that an editor can jump to each. Must not: find mistakes.

use std::fmt;

use super::located::{Location, SourceMap};
use super::origin::ConfigOrigin;

/// One mistake: `key` (`camera[0].source.width`; empty for the file as a whole), where the file
/// writes it (or the table that should hold it), and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mistake {
    pub key: String,
    pub at: Option<Location>,
    pub message: String,
}

impl Mistake {
    /// A mistake at `key`, located in `places`.
    pub fn at_key(key: String, message: String, places: &SourceMap) -> Mistake {
        let at = if key.is_empty() { None } else { places.locate(&key) };
        Mistake { key, at, message }
    }
}

/// Every mistake found in one file, in the order of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mistakes {
    pub origin: ConfigOrigin,
    pub list: Vec<Mistake>,
}

impl Mistakes {
    /// `list` sorted by where each mistake is written (those that are nowhere in the file last).
    pub fn new(origin: ConfigOrigin, mut list: Vec<Mistake>) -> Mistakes {
        list.sort_by_key(|mistake| (mistake.at.is_none(), mistake.at));
        Mistakes { origin, list }
    }

    fn line(&self, mistake: &Mistake) -> String {
        let place = match mistake.at {
            Some(at) => format!("{}:{at}", self.origin),
            None => self.origin.to_string(),
        };
        match mistake.key.as_str() {
            "" => format!("{place}: {}", mistake.message),
            key => format!("{place}: `{key}`: {}", mistake.message),
        }
    }
}

impl fmt::Display for Mistakes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.list.as_slice() {
            [one] => f.write_str(&self.line(one)),
            list => {
                write!(f, "{} mistakes in {}:", list.len(), self.origin)?;
                for mistake in list {
                    write!(f, "\n  {}", self.line(mistake))?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_mistake_is_one_line_and_several_are_one_line_each_in_file_order() {
        let origin = ConfigOrigin::File("/etc/j.toml".into());
        let at = |line, column| Some(Location { line, column });
        let mistake = |key: &str, at| Mistake { key: key.into(), at, message: "wrong".into() };
        let one = Mistakes::new(origin.clone(), vec![mistake("mqtt.port", at(3, 1))]);
        assert_eq!(one.to_string(), "/etc/j.toml:3:1: `mqtt.port`: wrong");
        let three = Mistakes::new(
            origin,
            vec![mistake("camera", None), mistake("mqtt.port", at(3, 1)), mistake("device.id", at(1, 5))],
        );
        assert_eq!(
            three.to_string(),
            "3 mistakes in /etc/j.toml:\n  /etc/j.toml:1:5: `device.id`: wrong\n  /etc/j.toml:3:1: `mqtt.port`: wrong\n  \
             /etc/j.toml: `camera`: wrong"
        );
    }
}
