//! `GET /metrics`: the live view as Prometheus metrics (`prometheus-client`'s OpenMetrics text; the
//! classic text format is made from it by [`super::exposition`]).
//!
//! Owns: the metric names, units, help texts and labels. Names follow Prometheus' conventions:
//! the `jetson_detectd_` prefix, base units in the name (`_seconds`, `_bytes`, `_hertz`,
//! `_celsius`, `_watts`, `_ratio`), `_total` on counters; per-camera metrics carry a `camera`
//! label. Everything is read from the [`LiveView`] at scrape time, so nothing is counted twice and
//! nothing runs per frame; each outlet's metrics are the ones it names in its figures
//! (`crate::publish::figures`), written here with an `outlet` label added to every sample. Must
//! not: keep state of its own, block on the pipeline, or know any outlet.

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use super::exposition::{classic_from_openmetrics, Format};
use crate::infer::agreement::Agreement;
use crate::infer::engine_build::{BuildState, ModelBuildReport};
use crate::publish::dispatch::NamedFigures;
use crate::publish::figures::{Metric, Samples};
use crate::publish::live::LiveView;
use crate::service::telemetry::LATENCY_BUCKETS_S;
use crate::source::SourceState;

/// The registry with its one collector.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
}

impl Metrics {
    /// The live view's metrics, every outlet's among them.
    pub fn new(view: Arc<LiveView>) -> Metrics {
        let mut registry = Registry::with_prefix("jetson_detectd");
        registry.register_collector(Box::new(ViewCollector { view }));
        Metrics { registry }
    }

    /// The exposition text in `format` (OpenMetrics' ends with `# EOF`).
    pub fn encode(&self, format: Format) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(match format {
            Format::OpenMetrics => text,
            Format::Classic => classic_from_openmetrics(&text),
        })
    }
}

#[derive(Debug)]
struct ViewCollector {
    view: Arc<LiveView>,
}

type LabelPairs = Vec<(&'static str, String)>;

/// The unit of every `0..1` (or `1.0 = one core`) gauge: `_ratio`, as Prometheus' naming guide
/// has it (`Unit::Ratios` would make it `_ratios`).
fn ratio() -> Unit {
    Unit::Other("ratio".into())
}

/// Writes one metric family: a descriptor, then one sample per label set.
struct Family<'e, 'w> {
    encoder: &'e mut DescriptorEncoder<'w>,
}

impl Family<'_, '_> {
    fn gauges(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<&Unit>,
        samples: impl IntoIterator<Item = (LabelPairs, f64)>,
    ) -> Result<(), std::fmt::Error> {
        let mut metric = self.encoder.encode_descriptor(name, help, unit, MetricType::Gauge)?;
        for (labels, value) in samples {
            ConstGauge::new(value).encode(metric.encode_family(&labels)?)?;
        }
        Ok(())
    }

    fn counters(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<&Unit>,
        samples: impl IntoIterator<Item = (LabelPairs, u64)>,
    ) -> Result<(), std::fmt::Error> {
        let mut metric = self.encoder.encode_descriptor(name, help, unit, MetricType::Counter)?;
        for (labels, value) in samples {
            ConstCounter::new(value).encode(metric.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

impl Family<'_, '_> {
    /// Every outlet's metrics, one family per metric name (outlets that report the same name,
    /// such as `outlet_queue_messages`, share it: the first one's help and unit describe it), each
    /// sample labelled with its outlet first.
    fn outlets(&mut self, outlets: &[NamedFigures]) -> Result<(), std::fmt::Error> {
        let mut families: Vec<(&Metric, Vec<(&str, &Samples)>)> = Vec::new();
        for named in outlets {
            for metric in &named.figures.metrics {
                match families.iter_mut().find(|(first, _)| first.name == metric.name) {
                    Some((_, samples)) => samples.push((&named.outlet, &metric.samples)),
                    None => families.push((metric, vec![(&named.outlet, &metric.samples)])),
                }
            }
        }
        for (first, samples) in families {
            let unit = first.unit.map(|unit| Unit::Other(unit.into()));
            let labelled = |outlet: &str, labels: &[(&'static str, String)]| -> LabelPairs {
                std::iter::once(("outlet", outlet.to_owned())).chain(labels.iter().cloned()).collect()
            };
            match first.samples {
                Samples::Gauge(_) => self.gauges(
                    first.name,
                    first.help,
                    unit.as_ref(),
                    samples.iter().flat_map(|(outlet, samples)| match samples {
                        Samples::Gauge(values) => {
                            values.iter().map(|(labels, value)| (labelled(outlet, labels), *value)).collect()
                        }
                        Samples::Counter(_) => Vec::new(),
                    }),
                )?,
                Samples::Counter(_) => self.counters(
                    first.name,
                    first.help,
                    unit.as_ref(),
                    samples.iter().flat_map(|(outlet, samples)| match samples {
                        Samples::Counter(values) => {
                            values.iter().map(|(labels, value)| (labelled(outlet, labels), *value)).collect()
                        }
                        Samples::Gauge(_) => Vec::new(),
                    }),
                )?,
            }
        }
        Ok(())
    }
}

fn camera(name: &str) -> LabelPairs {
    vec![("camera", name.to_string())]
}

fn state_name(state: &SourceState) -> &'static str {
    match state {
        SourceState::Streaming => "streaming",
        SourceState::Connecting { .. } => "connecting",
        SourceState::Reconnecting { .. } => "reconnecting",
        SourceState::Ended => "ended",
        SourceState::Stopped => "stopped",
    }
}

/// The engines built while the CPU serves (`engine.serve_while_building`), per `model`.
fn engine_builds(family: &mut Family<'_, '_>, builds: &[ModelBuildReport]) -> Result<(), std::fmt::Error> {
    let model = |build: &ModelBuildReport| vec![("model", build.model.clone())];
    const STATES: [BuildState; 7] = [
        BuildState::Building,
        BuildState::Waiting,
        BuildState::Checking,
        BuildState::Ready,
        BuildState::Refused,
        BuildState::Failed,
        BuildState::Stopped,
    ];
    family.gauges(
        "engine_build_state",
        "1 for the state of the model's engine build (building, waiting, checking, ready, refused, failed, stopped), \
         0 for the others.",
        None,
        builds.iter().flat_map(|build| {
            STATES.iter().map(move |state| {
                let mut labels = model(build);
                labels.push(("state", state.name().to_owned()));
                (labels, if build.status == *state { 1.0 } else { 0.0 })
            })
        }),
    )?;
    family.gauges(
        "engine_build_progress",
        "How far the builder's outermost phase is (TensorRT 10 and newer), 0 to 1.",
        Some(&ratio()),
        builds.iter().filter_map(|build| Some((model(build), build.percent? / 100.0))),
    )?;
    family.gauges(
        "engine_serving",
        "1 for the engine that serves the model now: cpu while its engine builds, then the engine's kind.",
        None,
        builds.iter().map(|build| {
            let mut labels = model(build);
            labels.push(("engine", build.serving.to_owned()));
            (labels, 1.0)
        }),
    )?;
    let figure = |value: fn(&Agreement) -> Option<f64>| {
        move |build: &ModelBuildReport| Some((model(build), value(build.agreement.as_ref()?)?))
    };
    family.gauges(
        "engine_agreement_recall",
        "The new engine's recall against the model's CPU reference in its check, 0 to 1.",
        Some(&ratio()),
        builds.iter().filter_map(figure(|agreement| agreement.recall)),
    )?;
    family.gauges(
        "engine_agreement_precision",
        "The new engine's precision against the model's CPU reference in its check, 0 to 1.",
        Some(&ratio()),
        builds.iter().filter_map(figure(|agreement| agreement.precision)),
    )
}

impl Collector for ViewCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let view = &self.view;
        let figures = view.figures();
        let snapshots: Vec<_> = view.cameras.iter().map(|c| (c.name.as_str(), c.stats.peek())).collect();
        let mut family = Family { encoder: &mut encoder };

        family.gauges(
            "healthy",
            "1 while every pipeline makes progress (the watchdog's verdict, as /healthz), else 0.",
            None,
            [(Vec::new(), if view.health().is_ok() { 1.0 } else { 0.0 })],
        )?;
        family.gauges(
            "model_load",
            "Time the model took to load at start, an engine build included when one ran.",
            Some(&Unit::Seconds),
            [(Vec::new(), view.facts.model_load.as_secs_f64())],
        )?;

        if !figures.builds.is_empty() {
            engine_builds(&mut family, &figures.builds)?;
        }

        family.counters(
            "camera_frames",
            "Frames processed.",
            None,
            snapshots.iter().map(|(name, s)| (camera(name), s.frames)),
        )?;
        family.counters(
            "camera_dropped_frames",
            "Frames dropped before processing (the pipeline was behind, or the source lost them).",
            None,
            snapshots.iter().map(|(name, s)| (camera(name), s.dropped)),
        )?;
        family.counters(
            "camera_over_limit_frames",
            "Frames skipped for being larger than [limits] allows.",
            None,
            snapshots.iter().map(|(name, s)| (camera(name), s.over_limit)),
        )?;
        family.counters(
            "camera_truncated_frames",
            "Frames decoded from truncated data (a JPEG cut short, the missing part grey) and processed.",
            None,
            snapshots.iter().map(|(name, s)| (camera(name), s.truncated)),
        )?;
        family.counters(
            "camera_gated_frames",
            "Frames the motion gate kept from inference (nothing moved on them; [motion]).",
            None,
            snapshots.iter().map(|(name, s)| (camera(name), s.gated)),
        )?;
        {
            let mut metric = family.encoder.encode_descriptor(
                "camera_inference_saved",
                "Inference time the gated frames saved (each at the camera's last processed frame's).",
                Some(&Unit::Seconds),
                MetricType::Counter,
            )?;
            for (name, s) in &snapshots {
                ConstCounter::new(s.inference_saved_s).encode(metric.encode_family(&camera(name))?)?;
            }
        }
        family.counters(
            "camera_frame_copies",
            "Full-frame copies the source made on the way into the frame slots (0 per frame when zero-copy).",
            None,
            view.cameras.iter().map(|c| (camera(&c.name), c.stats.frame_copies_total())),
        )?;
        family.gauges(
            "camera_fps",
            "Frames processed per second over the last refresh (about 2 s).",
            None,
            snapshots
                .iter()
                .enumerate()
                .map(|(i, (name, _))| (camera(name), figures.fps.get(i).copied().unwrap_or(0.0))),
        )?;
        let states = ["streaming", "connecting", "reconnecting", "ended", "stopped"];
        family.gauges(
            "camera_state",
            "1 for the state the camera's source is in, 0 for the others.",
            None,
            view.cameras.iter().enumerate().flat_map(|(i, c)| {
                let current = figures.sources.get(i).cloned().flatten().map(|report| state_name(&report.state));
                states.iter().map(move |state| {
                    let labels = vec![("camera", c.name.clone()), ("state", state.to_string())];
                    (labels, if current == Some(*state) { 1.0 } else { 0.0 })
                })
            }),
        )?;
        {
            let mut metric = family.encoder.encode_descriptor(
                "camera_stage_latency",
                "Time per frame in each stage: source (capture), wait (in the ring), pre, infer, post, \
                 publish, total (hand-over to the worker to message, wait included).",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for c in &view.cameras {
                for (stage, histogram) in c.stats.histograms() {
                    let labels = vec![("camera", c.name.clone()), ("stage", stage.name().to_string())];
                    // The encoder sums the buckets up itself; f64::MAX stands for `+Inf`.
                    let beyond = histogram.count - histogram.buckets.iter().sum::<u64>();
                    let buckets: Vec<(f64, u64)> = LATENCY_BUCKETS_S
                        .iter()
                        .copied()
                        .zip(histogram.buckets)
                        .chain(std::iter::once((f64::MAX, beyond)))
                        .collect();
                    metric.encode_family(&labels)?.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                        histogram.sum_s,
                        histogram.count,
                        &buckets,
                        None,
                    )?;
                }
            }
        }

        if let Some(scheduler) = &figures.scheduler {
            {
                let mut metric = family.encoder.encode_descriptor(
                    "inference_batch_size",
                    "Frames per inference.",
                    None,
                    MetricType::Histogram,
                )?;
                let sizes = 1..=scheduler.max_batch.max(1);
                let in_sizes: u64 =
                    sizes.clone().map(|size| scheduler.batch_sizes.get(&size).copied().unwrap_or(0)).sum();
                let buckets: Vec<(f64, u64)> = sizes
                    .map(|size| (size as f64, scheduler.batch_sizes.get(&size).copied().unwrap_or(0)))
                    .chain(std::iter::once((f64::MAX, scheduler.batches.saturating_sub(in_sizes))))
                    .collect();
                metric.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                    scheduler.frames as f64,
                    scheduler.batches,
                    &buckets,
                    None,
                )?;
            }
            family.gauges("inference_workers", "Inference workers.", None, [(Vec::new(), scheduler.workers as f64)])?;
            let memory = scheduler.memory;
            family.gauges(
                "context_scratch",
                "Scratch (activation) memory of the execution contexts together.",
                Some(&Unit::Bytes),
                [(Vec::new(), memory.scratch_bytes as f64)],
            )?;
            family.gauges(
                "context_persistent",
                "Memory the execution contexts keep for themselves beyond their scratch.",
                Some(&Unit::Bytes),
                [(Vec::new(), memory.persistent_bytes as f64)],
            )?;
            family.gauges(
                "context_saved",
                "Memory saved against one execution context per camera.",
                Some(&Unit::Bytes),
                [(Vec::new(), memory.saved_bytes as f64)],
            )?;
        }

        family.outlets(&figures.outlets)?;

        if let Some(load) = &figures.system {
            family.gauges(
                "process_cpu",
                "CPU time of the daemon per second of wall time (1.0 = one core), over the last refresh.",
                Some(&ratio()),
                [(Vec::new(), f64::from(load.process.cpu_percent) / 100.0)],
            )?;
            family.gauges(
                "process_resident_memory",
                "Resident memory of the daemon.",
                Some(&Unit::Bytes),
                [(Vec::new(), load.process.rss_bytes as f64)],
            )?;
            family.gauges(
                "system_cpu",
                "CPU use of the whole machine, 0..1.",
                Some(&ratio()),
                [(Vec::new(), f64::from(load.system.cpu_percent) / 100.0)],
            )?;
            family.gauges(
                "system_memory_used",
                "Memory in use on the machine.",
                Some(&Unit::Bytes),
                [(Vec::new(), load.system.mem_used_bytes as f64)],
            )?;
            family.gauges(
                "system_memory_total",
                "Memory of the machine.",
                Some(&Unit::Bytes),
                [(Vec::new(), load.system.mem_total_bytes as f64)],
            )?;
        }
        let jetson = &figures.jetson;
        if let Some(gpu) = &jetson.gpu {
            if let Some(load) = gpu.load_percent {
                family.gauges(
                    "gpu_load",
                    "GPU load, 0..1.",
                    Some(&ratio()),
                    [(Vec::new(), f64::from(load) / 100.0)],
                )?;
            }
            if let Some(freq) = gpu.freq_hz {
                family.gauges(
                    "gpu_frequency",
                    "GPU clock now.",
                    Some(&Unit::Other("hertz".into())),
                    [(Vec::new(), freq as f64)],
                )?;
            }
            if let Some(max) = gpu.max_freq_hz {
                family.gauges(
                    "gpu_max_frequency",
                    "Highest GPU clock the governor may set.",
                    Some(&Unit::Other("hertz".into())),
                    [(Vec::new(), max as f64)],
                )?;
            }
        }
        if !jetson.thermal.is_empty() {
            family.gauges(
                "thermal_zone_temperature",
                "Temperature of each thermal zone of the board.",
                Some(&Unit::Celsius),
                jetson.thermal.iter().map(|(zone, celsius)| (vec![("zone", zone.clone())], *celsius)),
            )?;
        }
        if !jetson.power.is_empty() {
            family.gauges(
                "power_rail",
                "Power drawn on each INA3221 rail of the board.",
                Some(&Unit::Other("watts".into())),
                jetson.power.iter().map(|(rail, power)| (vec![("rail", rail.clone())], power.mw as f64 / 1000.0)),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::config::Config;
    use crate::detection::Labels;
    use crate::publish::figures::{self, OutletFigures};
    use crate::publish::live::{Figures, StartFacts};
    use crate::service::notify::Liveness;

    fn named(outlet: &str, metrics: Vec<Metric>) -> NamedFigures {
        NamedFigures { outlet: outlet.into(), figures: OutletFigures { metrics, ..OutletFigures::default() } }
    }

    #[test]
    fn outlets_that_report_one_figure_share_its_family_and_each_sample_names_its_outlet() {
        let config = Config::embedded_default().expect("the embedded default is valid");
        let labels = Arc::new(Labels::parse("person\n", std::path::Path::new("labels.txt")).expect("labels"));
        let facts =
            StartFacts { engine: serde_json::Value::Null, model_load: Duration::ZERO, started: SystemTime::now() };
        let view = Arc::new(LiveView::new(Arc::new(config), labels, Liveness::new(), Duration::from_secs(30), facts));
        let own = Metric {
            name: "kafka_partitions",
            help: "Partitions.",
            unit: None,
            samples: Samples::Gauge(vec![(vec![("topic", "events".into())], 3.0)]),
        };
        view.set_figures(Figures {
            outlets: vec![
                named("mqtt", vec![figures::queued_messages(2), figures::dropped_messages(5)]),
                named("kafka", vec![figures::queued_messages(7), own]),
            ],
            ..Figures::default()
        });
        let text = Metrics::new(view).encode(Format::OpenMetrics).expect("metrics");
        let lines: Vec<&str> =
            text.lines().filter(|line| line.contains("outlet_queue") || line.contains("kafka")).collect();
        assert_eq!(
            lines,
            [
                "# HELP jetson_detectd_outlet_queue_messages Messages waiting in the outlet's queue or in flight.",
                "# TYPE jetson_detectd_outlet_queue_messages gauge",
                "jetson_detectd_outlet_queue_messages{outlet=\"mqtt\"} 2.0",
                "jetson_detectd_outlet_queue_messages{outlet=\"kafka\"} 7.0",
                "# HELP jetson_detectd_kafka_partitions Partitions.",
                "# TYPE jetson_detectd_kafka_partitions gauge",
                "jetson_detectd_kafka_partitions{outlet=\"kafka\",topic=\"events\"} 3.0",
            ]
        );
        assert!(text.contains("jetson_detectd_outlet_dropped_messages_total{outlet=\"mqtt\"} 5\n"), "{text}");
    }
}
