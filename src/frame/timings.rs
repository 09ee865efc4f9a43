//! The timed stages of a frame's way through the pipeline, which every later stage reports.
//!
//! Owns: [`Stage`] (with its JSON key) and [`FrameTimings`]. Must not: measure anything itself.

use std::time::Duration;

/// Timed stages of a pipeline. `Total` is source-capture to publish-ready of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    Source,
    /// In the ring until the inference worker took it: other cameras' frames ahead of it.
    Wait,
    Pre,
    Infer,
    Post,
    Publish,
    Total,
}

impl Stage {
    pub const ALL: [Stage; 7] =
        [Stage::Source, Stage::Wait, Stage::Pre, Stage::Infer, Stage::Post, Stage::Publish, Stage::Total];

    /// The JSON key of the stage.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Source => "source",
            Stage::Wait => "wait",
            Stage::Pre => "pre",
            Stage::Infer => "infer",
            Stage::Post => "post",
            Stage::Publish => "publish",
            Stage::Total => "total",
        }
    }

    /// The stage's position in [`Stage::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Stage durations of one processed frame; a stage the pipeline did not time stays `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FrameTimings {
    pub source: Option<Duration>,
    pub wait: Option<Duration>,
    pub pre: Option<Duration>,
    pub infer: Option<Duration>,
    pub post: Option<Duration>,
    pub publish: Option<Duration>,
    pub total: Option<Duration>,
}

impl FrameTimings {
    pub fn get(&self, stage: Stage) -> Option<Duration> {
        match stage {
            Stage::Source => self.source,
            Stage::Wait => self.wait,
            Stage::Pre => self.pre,
            Stage::Infer => self.infer,
            Stage::Post => self.post,
            Stage::Publish => self.publish,
            Stage::Total => self.total,
        }
    }
}
