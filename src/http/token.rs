//! The bearer token every write must carry (`[http] token_file`): read once at start, never
//! logged, compared in constant time.
//!
//! Owns: [`Token`]. Must not: print or log it.

use std::path::Path;
use std::sync::Arc;

use super::error::HttpError;

/// Largest token file read (a token is one line).
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// The bearer token that writes must carry.
#[derive(Clone)]
pub struct Token(Arc<str>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<hidden>)")
    }
}

impl Token {
    /// The first line of `path`, trimmed; an empty one is refused.
    pub fn read(path: &Path) -> Result<Token, HttpError> {
        let error = |reason: String| HttpError::Token { path: path.to_path_buf(), reason };
        // Bounded, non-blocking, regular files only: a FIFO in its place must not hang the start.
        let text = crate::sys::files::read_to_string(path, MAX_TOKEN_FILE_BYTES).map_err(|e| error(e.to_string()))?;
        let token = text.lines().next().unwrap_or_default().trim();
        if token.is_empty() {
            return Err(error("the first line is empty".into()));
        }
        Ok(Token(token.into()))
    }

    #[cfg(test)]
    pub fn new(token: &str) -> Token {
        Token(token.into())
    }

    /// Whether `candidate` is the token; takes the same time wherever the first difference is.
    pub fn matches(&self, candidate: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), candidate.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_matches_only_itself_and_never_prints() {
        let token = Token::new("s3cret");
        assert!(token.matches("s3cret"));
        assert!(!token.matches("s3cre"));
        assert!(!token.matches("s3creT"));
        assert!(!format!("{token:?}").contains("s3cret"));
    }

    #[test]
    fn a_token_file_gives_its_first_line_and_an_empty_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "  abc123  \nsecond line\n").unwrap();
        assert!(Token::read(&path).unwrap().matches("abc123"));
        std::fs::write(&path, "\n").unwrap();
        let error = Token::read(&path).unwrap_err().to_string();
        assert!(error.contains("http.token_file") && error.contains("empty"), "{error}");
    }
}
