//! What engine a model needs on this machine: its build options and the two keys it can be
//! cached under.
//!
//! Owns: turning a [`ModelSpec`] and a [`BuildTarget`] into [`BuildOptions`] (one optimisation
//! profile per concurrently running context, batches of 1..=`engine.max_batch`) and an
//! [`EnginePlan`] (the ONNX file read once, its [`EngineIdentity`] for a dynamic input and for a
//! static one). Must not: look anything up or build.

use std::time::Duration;

use super::cache::{BuildOptions, EngineIdentity, InputProfiles, ModelInput, ShapeProfile};
use super::error::EngineError;
use super::seam::BuildTarget;
use crate::model::ModelSpec;

/// Execution contexts of one engine that can run at the same time: one, because one inference
/// worker per GPU serves every camera (`crate::infer::scheduler`); the one-shot commands use one too.
pub fn concurrent_contexts() -> u32 {
    1
}

/// The input shapes the engine is built for: the model's input, with a batch of
/// 1..=`engine.max_batch`, tuned (opt) for a full batch. Nothing here depends on the number of
/// cameras: the profile is in the engine's cache key, and adding a camera must not rebuild an
/// engine (minutes on a Jetson). The builder applies a range only to the dimensions the model
/// leaves open; a model with a fixed batch of 1 keeps it. On a DLA core (`engine.dla_core`) the
/// batch is pinned to 1 (min = opt = max): DLA takes static shapes only, and TensorRT would
/// otherwise quietly build the whole network for the GPU.
pub fn input_profile(model: &ModelSpec) -> ShapeProfile {
    let shape: Vec<i64> = model.input.shape().iter().map(|d| *d as i64).collect();
    let input = model.input.name.clone().unwrap_or_default();
    let mut profile = ShapeProfile::fixed(input, &shape);
    if model.engine.dla_core.is_none() {
        let max_batch = i64::try_from(model.engine.max_batch.get()).unwrap_or(1);
        profile.opt[0] = max_batch;
        profile.max[0] = max_batch;
    }
    profile
}

/// Says so when a DLA core is asked for with batches: the DLA engine takes one frame at a time.
pub fn dla_batch_warning(model: &ModelSpec) -> Option<String> {
    let max_batch = model.engine.max_batch.get();
    (model.engine.dla_core.is_some() && max_batch > 1).then(|| {
        format!(
            "engine.dla_core is set: DLA runs static shapes only, so the engine takes one frame per inference \
             (engine.max_batch = {max_batch} applies to GPU engines)"
        )
    })
}

/// The builder options `model`'s engine options ask for, built by `builder` (its fingerprint).
/// The input profile ([`input_profile`]) is added once per context that can run at the same time
/// ([`concurrent_contexts`]); it only matters for models with dynamic input dimensions.
pub fn build_options(model: &ModelSpec, builder: &str) -> BuildOptions {
    BuildOptions {
        builder: builder.to_owned(),
        precision: model.engine.precision,
        workspace_bytes: model.engine.workspace_bytes,
        dla_core: model.engine.dla_core,
        optimization_level: model.engine.optimization_level,
        input_profiles: Some(InputProfiles { shape: input_profile(model), count: concurrent_contexts() }),
    }
}

/// Everything needed to look up or build the engine of an ONNX model on one target.
#[derive(Debug, Clone)]
pub struct EnginePlan {
    /// Read once: the key hashes exactly the bytes a build parses.
    pub model: ModelInput,
    pub options: BuildOptions,
    /// The engine's identity when the model's input is dynamic (its profiles matter).
    pub identity: EngineIdentity,
    /// The identity when the input turns out static: no profiles are added then, so the engine is
    /// the same whatever the profile count, and adding a camera must not rebuild it.
    pub static_identity: EngineIdentity,
    /// `engine.build_timeout_s`: the longest build, and the longest wait for another's.
    pub build_timeout: Duration,
}

impl EnginePlan {
    /// Reads `spec`'s ONNX file and derives both identities on `target`.
    pub fn new(spec: &ModelSpec, target: &BuildTarget) -> Result<EnginePlan, EngineError> {
        let onnx = spec.files.onnx().ok_or_else(|| {
            EngineError::Config("building an engine needs `model.onnx` (or give a prebuilt `model.engine`)".into())
        })?;
        if let Some(warning) = dla_batch_warning(spec) {
            log::warn!("{warning}");
        }
        let model = ModelInput::read(onnx)?;
        let options = build_options(spec, &target.builder);
        let identity = EngineIdentity::new(&model.digest, &target.version, &target.device, &options);
        let static_options = BuildOptions { input_profiles: None, ..options.clone() };
        let static_identity = EngineIdentity::new(&model.digest, &target.version, &target.device, &static_options);
        Ok(EnginePlan { model, options, identity, static_identity, build_timeout: spec.engine.build_timeout })
    }

    /// The identity an engine with `profiles` optimisation profiles is filed under.
    pub fn identity_for(&self, profiles: u32) -> &EngineIdentity {
        if profiles == 0 {
            &self.static_identity
        } else {
            &self.identity
        }
    }
}

/// The bundled model as the tests of the engine lifecycle describe it.
#[cfg(test)]
pub(crate) mod test_support {
    use std::path::Path;

    use crate::config::{Config, ConfigOrigin};
    use crate::model::ModelSpec;

    /// The bundled SSD model on one synthetic camera, with `extra` TOML after it.
    pub fn config(extra: &str) -> Config {
        let text = format!(
            r#"
            [model]
            onnx = "models/ssd_mobilenet_v2_coco_prenms_fp32.onnx"
            labels = "models/coco_labels.txt"
            decoder = "ssd"
            input = {{ width = 300, height = 300, layout = "nhwc", dtype = "u8" }}
            [[camera]]
            name = "front"
            source = {{ kind = "synthetic" }}
            {extra}
            "#
        );
        Config::from_toml(&text, ConfigOrigin::Embedded, Path::new(env!("CARGO_MANIFEST_DIR"))).expect("valid config")
    }

    /// The model `config` describes, as every command builds it.
    pub fn spec(config: &Config) -> ModelSpec {
        ModelSpec::from_config(config).expect("a model spec")
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{config, spec};
    use super::*;
    use crate::backend::engine::device_key::DeviceIdentity;
    use crate::config::{Config, Precision};

    /// A TensorRT builder's fingerprint.
    const BUILDER: &str = "shim 0123456789ab, TensorRT headers 10.3.0";

    fn options(spec: &ModelSpec) -> BuildOptions {
        build_options(spec, BUILDER)
    }

    /// A 64 GiB AGX Orin developer kit.
    fn agx_orin() -> DeviceIdentity {
        DeviceIdentity {
            name: "Orin".into(),
            compute_capability: (8, 7),
            multiprocessors: 16,
            total_memory_bytes: 64 << 30,
            board: "NVIDIA Jetson AGX Orin Developer Kit".into(),
        }
    }

    #[test]
    fn options_follow_the_config() {
        let fp16 = options(&spec(&config("[engine]\nprecision = \"fp16\"\nworkspace_mib = 512")));
        assert_eq!(fp16.precision, Precision::Fp16);
        assert_eq!(fp16.workspace_bytes, 512 << 20);
        assert_eq!(fp16.dla_core, None);
        let batch_of_1_to_4 = ShapeProfile {
            input: String::new(),
            min: vec![1, 300, 300, 3],
            opt: vec![4, 300, 300, 3],
            max: vec![4, 300, 300, 3],
        };
        assert_eq!(fp16.input_profiles, Some(InputProfiles { shape: batch_of_1_to_4, count: 1 }));
        let unbatched =
            config("[engine]\nmax_batch = 1\n[[camera]]\nname = \"back\"\nsource = { kind = \"synthetic\" }");
        let shape = options(&spec(&unbatched)).input_profiles.expect("profiles").shape;
        assert_eq!((shape.opt[0], shape.max[0]), (1, 1), "max_batch = 1 builds for single frames");
    }

    #[test]
    fn adding_a_camera_keeps_the_engine_key() {
        let one = config("");
        let two = config("[[camera]]\nname = \"back\"\nsource = { kind = \"synthetic\" }");
        assert_eq!(two.cameras.len(), one.cameras.len() + 1);
        let device = DeviceIdentity {
            name: "Orin".into(),
            compute_capability: (8, 7),
            multiprocessors: 16,
            total_memory_bytes: 16 << 30,
            board: "NVIDIA Jetson AGX Orin".into(),
        };
        let digest =
            crate::backend::engine::cache::ModelDigest { sha256: "ab".repeat(32), external_data: Default::default() };
        let key = |config: &Config| EngineIdentity::new(&digest, "10.3.0", &device, &options(&spec(config))).key();
        assert_eq!(key(&one), key(&two));
    }

    #[test]
    fn a_dla_engine_is_pinned_to_single_frames_and_says_so() {
        let dla = config("[engine]\ndla_core = 1\nprecision = \"fp16\"\nmax_batch = 4");
        assert_eq!(options(&spec(&dla)).dla_core, Some(1));
        let shape = options(&spec(&dla)).input_profiles.expect("profiles").shape;
        assert_eq!((shape.min[0], shape.opt[0], shape.max[0]), (1, 1, 1));
        assert!(dla_batch_warning(&spec(&dla)).is_some_and(|w| w.contains("engine.dla_core")));
        assert_eq!(dla_batch_warning(&spec(&config("[engine]\nmax_batch = 4"))), None);
        assert_eq!(
            dla_batch_warning(&spec(&config("[engine]\ndla_core = 0\nprecision = \"fp16\"\nmax_batch = 1"))),
            None
        );
    }

    /// Engine-cache keys of today's model must never change by accident: a new key is a rebuild
    /// of minutes on every Jetson after an upgrade. The keys below were computed by the code
    /// before the model was described by a `ModelSpec`; the cache file names follow from them.
    #[test]
    fn todays_engine_keys_stay_the_same() {
        let device = agx_orin();
        let digest = crate::backend::engine::cache::ModelDigest {
            sha256: "5e".repeat(32),
            external_data: [("weights.bin".to_owned(), "d4".repeat(32))].into(),
        };
        let keys = |config: &Config| {
            let options =
                BuildOptions { builder: "shim 0123456789ab, TensorRT headers 10.3.0".into(), ..options(&spec(config)) };
            let static_options = BuildOptions { input_profiles: None, ..options.clone() };
            let key = |options: &BuildOptions| EngineIdentity::new(&digest, "10.3.0", &device, options).key();
            [key(&options), key(&static_options)]
        };
        let mut dla_int8 = config("[engine]\ndla_core = 1\nprecision = \"int8\"");
        dla_int8.model.input.name = Some("image_tensor".into());
        let configs = [
            config(""),
            config("[engine]\nprecision = \"fp16\"\nworkspace_mib = 512\nmax_batch = 8\noptimization_level = 5"),
            dla_int8,
        ];
        let computed: Vec<[String; 2]> = configs.iter().map(keys).collect();
        let today = [
            ["8e383044ec797a8d", "6b099d8db32e3001"],
            ["b77239324d0781f3", "b54bd85a4e16eba5"],
            ["c4983817b9707e7b", "bf66f15962f97267"],
        ];
        assert_eq!(computed, today);
    }
}
