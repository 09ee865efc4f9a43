//! A camera's `source` table, [`SourceConfig`]: the registered kinds, one line each. Each kind
//! answers for itself ([`SourceKind`]: its keys, defaults, documentation, checks, secrets, what it
//! delivers, how it opens) in its file of `super::kinds`; `crate::config` composes the table into
//! `[[camera]]` and asks it through [`SourceConfig::kind`]. Must not: know what a kind holds.
//!
//! Adding a kind: its file in `super::kinds` (a table type implementing [`SourceKind`], and its
//! `DOCUMENTATION`), and its line in `registered_kinds!` below. Its `kind` is the line's name in
//! lowercase.

use serde::{Deserialize, Serialize};

use super::kind::SourceKind;
use super::kinds::{csi, images, pipeline, rtsp, synthetic, v4l2};

/// Declares [`SourceConfig`] with one variant per kind (serde reads it by `kind`, the variant's
/// name in lowercase), its documentation in the variants' order, and the way to its kind.
macro_rules! registered_kinds {
    ($($name:ident($table:ty, $documentation:expr),)+) => {
        /// Where a camera's frames come from: one of the registered kinds, by `kind`.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind", rename_all = "lowercase")]
        pub enum SourceConfig {
            $($name($table),)+
        }

        impl SourceConfig {
            /// The kind it is, to ask.
            pub fn kind(&self) -> &dyn SourceKind {
                match self {
                    $(SourceConfig::$name(table) => table,)+
                }
            }

            /// The kind it is, to change (its paths resolved, a secret left out).
            pub fn kind_mut(&mut self) -> &mut dyn SourceKind {
                match self {
                    $(SourceConfig::$name(table) => table,)+
                }
            }

            /// Every kind's lines of the built-in default's documentation of `source`, in order.
            pub fn documentation() -> String {
                [$($documentation,)+].concat()
            }
        }
    };
}

registered_kinds! {
    Images(images::ImagesConfig, images::DOCUMENTATION),
    Synthetic(synthetic::SyntheticConfig, synthetic::DOCUMENTATION),
    V4l2(v4l2::V4l2Config, v4l2::DOCUMENTATION),
    Rtsp(rtsp::RtspConfig, rtsp::DOCUMENTATION),
    Csi(csi::CsiConfig, csi::DOCUMENTATION),
    Gstreamer(pipeline::PipelineConfig, pipeline::DOCUMENTATION),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tag names the kind; the kind's table takes every other key, and refuses one it does
    /// not know.
    #[test]
    fn a_source_table_is_read_by_its_kind_and_an_unknown_key_is_refused() {
        let source: SourceConfig = toml::from_str("kind = \"synthetic\"\nwidth = 64\n").expect("synthetic");
        assert_eq!(source, SourceConfig::Synthetic(synthetic::SyntheticConfig { width: 64, height: 480 }));
        assert_eq!(toml::to_string(&source).expect("toml"), "kind = \"synthetic\"\nwidth = 64\nheight = 480\n");
        let unknown = toml::from_str::<SourceConfig>("kind = \"synthetic\"\ndepth = 3\n").expect_err("unknown key");
        assert!(unknown.to_string().contains("unknown field `depth`"), "{unknown}");
        let kind = toml::from_str::<SourceConfig>("kind = \"mjpg\"\n").expect_err("unknown kind");
        assert!(kind.to_string().contains("unknown variant `mjpg`"), "{kind}");
    }
}
