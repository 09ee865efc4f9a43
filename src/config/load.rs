//! Loading the whole configuration ([`Config`]): the user's file merged over the built-in default
//! (the core's and each component section's), typed, its paths resolved, checked, every mistake
//! reported at once; the effective config printed back. Must not: open models, cameras or sockets.

use std::num::NonZeroUsize;
use std::path::Path;

use toml::{Table, Value};

use super::error::ConfigError;
use super::merge::{data_dir, merge, names_a_model, resolver};
use super::mistake::{Mistake, Mistakes};
use super::origin::ConfigOrigin;
use super::whole::{Config, CORE_DEFAULTS};
use super::{collect, located, models, reid, section, words, zones_file};

impl Config {
    /// Reads `path` (a regular file of at most
    /// [`MAX_CONFIG_BYTES`](crate::sys::files::MAX_CONFIG_BYTES)), merges it over the built-in
    /// default, resolves relative paths, validates; the core alone ([`section::Schema::CORE`]).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Self::load_with(path, &section::Schema::CORE)
    }

    /// [`Config::load`] with the sections of `schema`.
    pub(super) fn load_with(path: &Path, schema: &section::Schema) -> Result<Config, ConfigError> {
        let origin = ConfigOrigin::File(path.to_path_buf());
        let text = crate::sys::files::read_to_string(path, crate::sys::files::MAX_CONFIG_BYTES)
            .map_err(|source| ConfigError::Read { origin: origin.clone(), source })?;
        // Absolute, so that every path resolved against it (and every message naming one) is.
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let base = absolute.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::from_toml_with(&text, origin, &base, schema)
    }

    /// The built-in default alone (the core's); its relative paths resolve against the data
    /// directory.
    pub fn embedded_default() -> Result<Config, ConfigError> {
        Self::from_toml("", ConfigOrigin::Embedded, &data_dir())
    }

    /// `text` (a whole config or only the keys that differ) merged over the built-in default, then
    /// typed and validated. Tables merge key by key; any other value, arrays such as `[[camera]]`
    /// included, replaces the default's. Relative paths set in `text` resolve against `base`, the
    /// default's against [`data_dir`]. The core alone ([`section::Schema::CORE`]): a table that a
    /// component owns is unknown here (`crate::cmd::outlets::schema` reads the daemon's).
    ///
    /// Every mistake of the file is reported at once ([`ConfigError::Mistakes`]), each with its
    /// line and column: every syntax error; else every value that does not fit its type (each set
    /// aside in turn, `collect`), and what the checks find in the rest.
    pub fn from_toml(text: &str, origin: ConfigOrigin, base: &Path) -> Result<Config, ConfigError> {
        Self::from_toml_with(text, origin, base, &section::Schema::CORE)
    }

    /// [`Config::from_toml`] with the sections of `schema`: each one's defaults merged in, its
    /// table read by its own rules once the core is typed, then checked after the core's checks.
    pub(super) fn from_toml_with(
        text: &str,
        origin: ConfigOrigin,
        base: &Path,
        schema: &section::Schema,
    ) -> Result<Config, ConfigError> {
        let places = located::SourceMap::new(text);
        let user: Table = toml::from_str(text).map_err(|_| syntax_mistakes(text, &origin, &places))?;
        let mut merged: Table = toml::from_str(CORE_DEFAULTS)
            .map_err(|e| ConfigError::Parse { origin: ConfigOrigin::Embedded, message: e.to_string() })?;
        schema.merge_defaults(&mut merged)?;
        if names_a_model(&user) {
            // The model file keys default together: naming an engine must not keep the bundled ONNX.
            if let Some(Value::Table(model)) = merged.get_mut("model") {
                model.remove("onnx");
                model.remove("engine");
            }
        }
        let model_defaults = match merged.get("model") {
            Some(Value::Table(model)) => model.clone(),
            _ => Table::new(),
        };
        // What stands in for a value that does not fit: the default's, and for a named model's
        // key, `[model]`'s default.
        let mut fallback = merged.clone();
        if let Some(Value::Table(named)) = user.get("models") {
            let empty = named.keys().map(|name| (name.clone(), Value::Table(Table::new()))).collect();
            fallback.insert("models".into(), Value::Table(empty));
            models::fill_model_defaults(&mut fallback, &model_defaults);
        }
        merge(&mut merged, &user);
        reid::add_default_embedder(&mut merged, &data_dir());
        models::fill_model_defaults(&mut merged, &model_defaults);
        // The sections components own are read by their own rules, apart from the core (where a
        // table no component registered is unknown), and set in every typing of the core.
        let taken = schema.take_sections(&mut merged);
        let section_defaults = schema.take_sections(&mut fallback);
        let default_base = data_dir();
        let (sections, misfits, mut set_aside) =
            section::read_sections(taken, &section_defaults, &mut resolver(&user, base, &default_base));
        let mut mistakes: Vec<Mistake> =
            misfits.into_iter().map(|(key, message)| Mistake::at_key(key, words::explain(&message), &places)).collect();
        let (mut value, fallback) = (Value::Table(merged), Value::Table(fallback));
        // Typed again after a check's mistake is set aside, a value that no longer fits (a key
        // the check named removed from its table) is that setting aside's doing, not the file's:
        // only the first typing's misfits are the file's mistakes.
        let typed = |value: &mut Value, set_aside: &mut Vec<String>, mistakes: Option<&mut Vec<Mistake>>| {
            let (typed, misfits) = collect::deserialize_all::<Config>(value, &fallback, set_aside);
            if let Some(mistakes) = mistakes {
                let explained = misfits.into_iter().map(|mut misfit| {
                    if misfit.message.starts_with("unknown field") && !misfit.key.contains(['.', '[']) {
                        // The components' tables are not the core's fields: name them too.
                        schema.keys().for_each(|key| misfit.message.push_str(&format!(", `{key}`")));
                    }
                    Mistake::at_key(misfit.key, words::explain(&misfit.message), &places)
                });
                mistakes.extend(explained);
            }
            let mut config = typed?;
            config.sections = sections.clone();
            config.per_track_roles = schema.per_track().to_vec();
            config.origin = origin.clone();
            config.resolve_paths(&user, base, &default_base);
            config.model.recognise = config.keys_to_recognise(&user);
            config.prepare_named_models(&user, base);
            config.note_default_embedder(&user);
            Some(config)
        };
        let Some(mut config) = typed(&mut value, &mut set_aside, Some(&mut mistakes)) else {
            return Err(ConfigError::Mistakes(Mistakes::new(origin, mistakes)));
        };
        // Each check names its key; one about a value set aside is about the default's value that
        // stood in for it, not the file's.
        let note = |key: String, message: String, set_aside: &[String], mistakes: &mut Vec<Mistake>| {
            if !set_aside.iter().any(|path| key_is_under(&key, path)) {
                mistakes.push(Mistake::at_key(key, message, &places));
            }
        };
        for checked in [config.check_model_is_described(&user), config.validate_named_models(&user)] {
            match checked {
                Err(ConfigError::Invalid { key, message, .. }) => note(key, message, &set_aside, &mut mistakes),
                other => other?,
            }
        }
        // `validate` stops at the first mistake: each is set aside in turn, as a value that does
        // not fit its type is, so that the checks after it run too.
        for _ in 0..MAX_CHECK_ROUNDS {
            (config.zones_from_file, config.zones_file_problems) =
                zones_file::apply_at_start(&config.http.zones_file, &mut config.cameras, &mut config.masks_from_file);
            let (key, message) = match config.validate() {
                Ok(()) => break,
                Err(ConfigError::Invalid { key, message, .. }) => (key, message),
                Err(other) => return Err(other),
            };
            note(key.clone(), message, &set_aside, &mut mistakes);
            if !collect::set_aside_key(&mut value, &fallback, &key) {
                break;
            }
            set_aside.push(key);
            match typed(&mut value, &mut set_aside, None) {
                Some(retyped) => config = retyped,
                None => break,
            }
        }
        // The sections' checks, with the core's values (the ones set aside stand in as defaults).
        match config.check_sections() {
            Err(ConfigError::Invalid { key, message, .. }) => note(key, message, &set_aside, &mut mistakes),
            other => other?,
        }
        if !mistakes.is_empty() {
            return Err(ConfigError::Mistakes(Mistakes::new(origin, mistakes)));
        }
        Ok(config)
    }

    /// Every component section's checks against the config as it is now: after a zone change
    /// from the page or a reload, whose cameras and zones the sections may depend on (Home
    /// Assistant's entity ids do).
    pub fn check_sections(&self) -> Result<(), ConfigError> {
        self.sections.validate(self)
    }

    /// The config as a TOML value: the core's tables and each section's, as read (what a reload
    /// compares key by key).
    pub fn to_value(&self) -> Result<Value, String> {
        let mut value = Value::try_from(self).map_err(|e| e.to_string())?;
        let sections = self.sections.values()?;
        if let Value::Table(table) = &mut value {
            table.extend(sections.into_iter().map(|(key, section)| (key.to_owned(), section)));
        }
        Ok(value)
    }

    /// The effective configuration as TOML (`check-config --print`): every key with the value the
    /// daemon uses, defaults and computed values (device id, CPU threads; a section's own, such as
    /// MQTT's client id and topic prefix) filled in.
    /// Holds no secret: a password is never part of the config, only the file or variable
    /// that holds it.
    pub fn to_toml(&self) -> Result<String, ConfigError> {
        let mut effective = self.clone();
        effective.device.id = Some(self.device_id());
        effective.device.cpu_threads = NonZeroUsize::new(self.device.cpu_threads());
        effective.device.cpu_workers = NonZeroUsize::new(self.device.cpu_workers(self.cameras.len()));
        let cannot_print = |message: String| ConfigError::Parse {
            origin: self.origin.clone(),
            message: format!("cannot print: {message}"),
        };
        // The core as its struct prints (numbers as written), then each section.
        let core = toml::to_string(&effective).map_err(|e| cannot_print(e.to_string()))?;
        let sections = self.sections.effective_text(&effective).map_err(cannot_print)?;
        Ok(if sections.is_empty() { core } else { format!("{core}\n{sections}") })
    }

    /// The device id: configured, else the host name reduced to topic-safe characters.
    pub fn device_id(&self) -> String {
        if let Some(id) = &self.device.id {
            return id.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let id: String =
            host.trim().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).take(64).collect();
        if id.is_empty() {
            "jetson".into()
        } else {
            id
        }
    }
}

/// The core's paths.
impl Config {
    /// Resolves each relative path of the core's tables against the directory of the file that
    /// set it (the sections resolve their own: `super::whole::Section::resolve_paths`).
    pub(super) fn resolve_paths(&mut self, user: &Table, user_base: &Path, default_base: &Path) {
        let mut resolve = resolver(user, user_base, default_base);
        if let Some(p) = self.model.onnx.as_mut() {
            resolve(p, &["model", "onnx"]);
        }
        if let Some(p) = self.model.engine.as_mut() {
            resolve(p, &["model", "engine"]);
        }
        resolve(&mut self.model.labels, &["model", "labels"]);
        for camera in &mut self.cameras {
            for path in camera.source.kind_mut().paths_mut() {
                resolve(path, &["camera"]);
            }
        }
        if let Some(p) = self.device.onnxruntime_library.as_mut() {
            resolve(p, &["device", "onnxruntime_library"]);
        }
        let store = &mut self.engine.store;
        for (path, key) in [
            (store.public_key.as_mut(), "public_key"),
            (store.signing_key.as_mut(), "signing_key"),
            (store.password_file.as_mut(), "password_file"),
        ] {
            if let Some(p) = path {
                resolve(p, &["engine", "store", key]);
            }
        }
        if let Some(p) = self.http.token_file.as_mut() {
            resolve(p, &["http", "token_file"]);
        }
        resolve(&mut self.http.zones_file, &["http", "zones_file"]);
        resolve(&mut self.controls.file, &["controls", "file"]);
        resolve(&mut self.record.dir, &["record", "dir"]);
    }
}

/// Reading with the sections a [`section::Schema`] registers.
impl section::Schema {
    /// Reads `path` ([`Config::load`]) with this schema.
    pub fn load(&self, path: &Path) -> Result<Config, ConfigError> {
        Config::load_with(path, self)
    }

    /// The built-in default alone ([`Config::embedded_default`]) with this schema.
    pub fn embedded_default(&self) -> Result<Config, ConfigError> {
        Config::from_toml_with("", ConfigOrigin::Embedded, &super::merge::data_dir(), self)
    }

    /// `text` merged over the built-in default ([`Config::from_toml`]) with this schema.
    pub fn from_toml(&self, text: &str, origin: ConfigOrigin, base: &Path) -> Result<Config, ConfigError> {
        Config::from_toml_with(text, origin, base, self)
    }
}

/// Most rounds of checks for one file: each round sets aside one mistake the checks found.
const MAX_CHECK_ROUNDS: usize = 64;

/// Every syntax error of `text`, located (toml reads on after each one it can).
fn syntax_mistakes(text: &str, origin: &ConfigOrigin, places: &located::SourceMap) -> ConfigError {
    let (_, errors) = toml::de::DeTable::parse_recoverable(text);
    let list = errors
        .iter()
        .map(|error| Mistake {
            key: String::new(),
            at: error.span().map(|span| places.location(span.start)),
            message: format!("not TOML: {}", error.message().trim()),
        })
        .collect();
    ConfigError::Mistakes(Mistakes::new(origin.clone(), list))
}

/// Whether `key` is `path` or lies inside it (`camera[0].source.url` inside `camera[0]`).
fn key_is_under(key: &str, path: &str) -> bool {
    key.strip_prefix(path).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::device::MAX_CPU_THREADS;
    use crate::config::model::DESCRIPTION_KEYS;
    use crate::config::topic::machine_suffix;
    use crate::preprocess::{ResizeFilter, ResizeKind, TensorDtype};
    use crate::publish::mqtt::config::{MqttConfig, PublishMode};
    use crate::source::config::SourceConfig;
    use crate::source::images::ImageMode;
    use crate::source::kinds::csi::CsiConfig;
    use crate::source::kinds::images::ImagesConfig;
    use crate::source::kinds::rtsp::RtspConfig;
    use crate::source::rtsp_transport::RtspTransport;

    /// The daemon's config: the core and every outlet's sections.
    fn parse(text: &str) -> Result<Config, ConfigError> {
        crate::cmd::outlets::schema()
            .from_toml(text, ConfigOrigin::File("test.toml".into()), Path::new("/base"))
            .map_err(ConfigError::one)
    }

    fn embedded_default() -> Result<Config, ConfigError> {
        crate::cmd::outlets::schema().embedded_default()
    }

    fn mqtt(config: &Config) -> &MqttConfig {
        MqttConfig::of(config)
    }

    /// Each config text is refused, naming its key.
    fn assert_invalid_keys(cases: impl IntoIterator<Item = (String, &'static str)>) {
        for (text, key) in cases {
            match parse(&text) {
                Err(ConfigError::Invalid { key: got, .. }) => assert_eq!(got, key),
                other => panic!("expected an invalid `{key}`, got {other:?}"),
            }
        }
    }

    const MINIMAL: &str = r#"
        [model]
        onnx = "m.onnx"
        labels = "l.txt"
        decoder = "ssd"
        input = { width = 300, height = 300, layout = "nhwc", dtype = "u8" }
        [[camera]]
        name = "front"
        source = { kind = "synthetic" }
    "#;

    #[test]
    fn embedded_default_is_valid() {
        let config = embedded_default().expect("embedded default must validate");
        assert!(config.model.onnx.as_ref().is_some_and(|p| p.is_absolute()));
    }

    #[test]
    fn cpu_threads_defaults_to_the_available_cores_and_rejects_0_and_absurd_counts() {
        let config = parse(MINIMAL).expect("minimal");
        let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        assert_eq!(config.device.cpu_threads(), cores.min(MAX_CPU_THREADS));
        let config = parse(&format!("[device]\ncpu_threads = 3\n{MINIMAL}")).expect("3 threads");
        assert_eq!(config.device.cpu_threads(), 3);
        let error = parse(&format!("[device]\ncpu_threads = 0\n{MINIMAL}")).expect_err("0 threads");
        assert!(error.to_string().contains("cpu_threads"), "{error}");
        let error = parse(&format!("[device]\ncpu_threads = 1000\n{MINIMAL}")).expect_err("1000 threads");
        assert!(error.to_string().contains("device.cpu_threads") && error.to_string().contains("1..=256"), "{error}");
    }

    #[test]
    fn scheduling_keys_have_defaults_and_bounds() {
        let config = parse(MINIMAL).expect("minimal");
        assert_eq!(config.device.cpu_workers, None);
        let config = parse(&format!("[device]\ncpu_workers = 3\n{MINIMAL}")).expect("3 workers");
        assert_eq!(config.device.cpu_workers(8), 3);
        assert_eq!(config.engine.max_batch.get(), 4);
        assert_eq!(config.engine.batch_timeout(), std::time::Duration::ZERO);
        for (section, key, value, wanted) in [
            ("engine", "max_batch", "0", "max_batch"),
            ("engine", "max_batch", "65", "1..=64"),
            ("engine", "batch_timeout_ms", "1001", "0..=1000"),
            ("device", "cpu_workers", "0", "cpu_workers"),
        ] {
            let error = parse(&format!("[{section}]\n{key} = {value}\n{MINIMAL}")).expect_err(key);
            assert!(error.to_string().contains(wanted), "{key} = {value}: {error}");
        }
    }

    #[test]
    fn minimal_config_gets_defaults_and_resolved_paths() {
        let config = parse(MINIMAL).expect("valid");
        assert_eq!(config.model.onnx.as_deref(), Some(Path::new("/base/m.onnx")));
        assert_eq!(mqtt(&config).port, 1883);
        assert_eq!(config.model.input.resize, ResizeKind::Stretch);
        assert_eq!(config.model.input.filter, ResizeFilter::Antialias);
    }

    #[test]
    fn resize_filter_is_read_and_checked() {
        let bilinear =
            parse(&MINIMAL.replace("dtype = \"u8\"", "dtype = \"u8\", filter = \"bilinear\"")).expect("valid");
        assert_eq!(bilinear.model.input.filter, ResizeFilter::Bilinear);
        let err = parse(&MINIMAL.replace("dtype = \"u8\"", "dtype = \"u8\", filter = \"lanczos\"")).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("lanczos") && text.contains("antialias"), "{text}");
    }

    /// Issue 50, item 2: a file with several mistakes gets them all at once, each with its line
    /// and column, what is allowed in words and, for a misspelt key or value, the nearest one.
    #[test]
    fn every_mistake_of_a_file_is_reported_at_once_with_its_place_and_the_nearest_key() {
        let text = "[mqtt]\nhost = \"broker\"\nport = \"x\"\npasword_file = \"/etc/p\"\nqos = 3\n\n\
                    [model]\ndecoder = \"yolov99\"\n";
        let error = crate::cmd::outlets::schema()
            .from_toml(text, ConfigOrigin::File("my.toml".into()), Path::new("/base"))
            .unwrap_err();
        let ConfigError::Mistakes(mistakes) = &error else { panic!("{error:?}") };
        let said: Vec<(String, &str)> = mistakes
            .list
            .iter()
            .map(|mistake| (mistake.at.map(|at| at.to_string()).unwrap_or_default(), mistake.key.as_str()))
            .collect();
        let at = |place: &str, key: &'static str| (place.to_string(), key);
        assert_eq!(
            said,
            [at("3:1", "mqtt.port"), at("4:1", "mqtt.pasword_file"), at("5:1", "mqtt.qos"), at("8:1", "model.decoder")],
            "{error}"
        );
        let text = error.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "4 mistakes in my.toml:");
        assert_eq!(lines[1], "  my.toml:3:1: `mqtt.port`: \"x\" is text; allowed: a whole number from 0 to 65535");
        assert!(lines[2].starts_with("  my.toml:4:1: `mqtt.pasword_file`: no such key; did you mean `password_file`?"));
        assert_eq!(lines[3], "  my.toml:5:1: `mqtt.qos`: 3 is not 0, 1 or 2");
        assert!(lines[4].starts_with("  my.toml:8:1: `model.decoder`: \"yolov99\" is not allowed; did you mean"));
    }

    #[test]
    fn values_out_of_range_in_several_sections_are_all_reported() {
        let text = "[engine]\nframe_slots = 1\n[mqtt]\nqos = 7\n[snapshot]\njpeg_quality = 0\n\
                    [[camera]]\nname = \"a/b\"\nsource = { kind = \"synthetic\" }\n";
        let error = crate::cmd::outlets::schema()
            .from_toml(text, ConfigOrigin::File("my.toml".into()), Path::new("/base"))
            .unwrap_err();
        assert_eq!(
            error.keys(),
            ["engine.frame_slots", "mqtt.qos", "snapshot.jpeg_quality", "camera[0].name"],
            "{error}"
        );
    }

    #[test]
    fn every_syntax_error_is_located() {
        let error = parse("[mqtt\nhost = \"a\"\n[device]\nid = \n").unwrap_err();
        let ConfigError::Mistakes(mistakes) = &error else { panic!("{error:?}") };
        let lines: Vec<usize> = mistakes.list.iter().filter_map(|mistake| mistake.at.map(|at| at.line)).collect();
        assert!(lines.contains(&1) && lines.contains(&4), "{error}");
        assert!(error.to_string().contains("not TOML"), "{error}");
    }

    #[test]
    fn unknown_key_is_named() {
        let err = parse(&MINIMAL.replace("decoder = \"ssd\"", "decoder = \"ssd\"\nthreshold = 0.3")).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("test.toml") && text.contains("threshold"), "{text}");
    }

    #[test]
    fn bad_enum_value_lists_allowed_values() {
        let err = parse(&MINIMAL.replace("\"ssd\"", "\"yolov99\"")).unwrap_err().to_string();
        assert!(err.contains("yolov99") && err.contains("yolov8"), "{err}");
    }

    #[test]
    fn invalid_values_name_their_key() {
        let cases = [
            (MINIMAL.replace("[[camera]]", "[mqtt]\nqos = 3\n[[camera]]"), "mqtt.qos"),
            (MINIMAL.replace("name = \"front\"", "name = \"front/door\""), "camera[0].name"),
            (MINIMAL.replace("decoder = \"ssd\"", "decoder = \"ssd\"\nscore_threshold = 1.5"), "model.score_threshold"),
            (MINIMAL.replace("dtype = \"u8\"", "dtype = \"u8\", std = [255.0, 255.0, 255.0]"), "model.input.mean"),
            (format!("{MINIMAL}\n[limits]\nmax_width = 0"), "limits.max_width"),
            (format!("{MINIMAL}\n[limits]\nmax_alloc_mib = 0"), "limits.max_alloc_mib"),
            (format!("{MINIMAL}\n[mqtt]\nport = \"x\""), "mqtt.port"),
            (
                MINIMAL.replace("{ kind = \"synthetic\" }", "{ kind = \"synthetic\", width = 20000 }"),
                "camera[0].source",
            ),
        ];
        assert_invalid_keys(cases);
    }

    #[test]
    fn zones_lines_and_tracking_are_read_with_defaults() {
        let config = parse(&format!(
            "{MINIMAL}\n[[camera.zone]]\nname = \"drive\"\npolygon = [[0.1, 0.5], [0.9, 0.5], [0.9, 1.0], [0.1, 1.0]]\n\
             labels = [\"car\"]\n[[camera.line]]\nname = \"gate\"\npoints = [[0.5, 1.0], [0.5, 0.0]]\n"
        ))
        .expect("valid");
        let camera = &config.cameras[0];
        assert_eq!(camera.zones[0].name, "drive");
        assert_eq!(camera.zones[0].labels, ["car"]);
        assert_eq!(camera.lines[0].points, [[0.5, 1.0], [0.5, 0.0]]);
        assert_eq!(config.tracking, embedded_default().expect("default").tracking);
        assert!(config.tracking.enabled && config.tracking.min_hits == 3 && config.tracking.max_lost_s == 1.0);
        assert!(!config.snapshot.events);
        let none = parse(&MINIMAL.replace("[[camera]]", "[mqtt]\npublish = \"none\"\n[[camera]]")).expect("valid");
        assert_eq!(mqtt(&none).publish, PublishMode::None);
    }

    /// Every zone and line mistake is refused with the camera, the zone or line, and the reason.
    #[test]
    fn bad_zones_and_lines_name_the_camera_and_the_zone() {
        let zone = |polygon: &str| format!("{MINIMAL}\n[[camera.zone]]\nname = \"drive\"\npolygon = {polygon}\n");
        let line = |points: &str| format!("{MINIMAL}\n[[camera.line]]\nname = \"gate\"\npoints = {points}\n");
        let cases = [
            (zone("[[0.0, 0.0], [1.0, 0.0]]"), "camera[0].zone[0].polygon", "at least 3 points"),
            (
                zone("[[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]"),
                "camera[0].zone[0].polygon",
                "intersects itself",
            ),
            (zone("[[0.0, 0.0], [0.5, 0.5], [1.0, 1.0]]"), "camera[0].zone[0].polygon", "no area"),
            (zone("[[0.0, 0.0], [1.2, 0.0], [1.0, 1.0]]"), "camera[0].zone[0].polygon", "outside the frame"),
            (
                format!(
                    "{}[[camera.zone]]\nname = \"drive\"\npolygon = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]\n",
                    zone("[[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]")
                ),
                "camera[0].zone[1].name",
                "two zones",
            ),
            (
                zone("[[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]").replace("\"drive\"", "\"drive way\""),
                "camera[0].zone[0].name",
                "letters",
            ),
            (line("[[0.5, 0.5], [0.5, 0.5]]"), "camera[0].line[0].points", "two different points"),
            (line("[[0.5, 0.5], [0.5, -0.5]]"), "camera[0].line[0].points", "outside the frame"),
        ];
        for (text, key, reason) in cases {
            match parse(&text) {
                Err(ConfigError::Invalid { key: got, message, .. }) => {
                    assert_eq!(got, key, "{message}");
                    assert!(message.contains("camera \"front\"") && message.contains(reason), "{message}");
                }
                other => panic!("expected an invalid `{key}`, got {other:?}"),
            }
        }
    }

    #[test]
    fn bad_tracking_values_and_replay_rates_are_refused() {
        let cases = [
            ("[tracking]\nmax_lost_s = 0.0", "tracking.max_lost_s"),
            ("[tracking]\nmin_hits = 0", "tracking.min_hits"),
            ("[tracking]\nhigh_score = 1.5", "tracking.high_score"),
            ("[tracking]\nmatch_iou = 0.0", "tracking.match_iou"),
            ("[tracking]\nmax_tracks = 0", "tracking.max_tracks"),
            ("[tracking]\nstationary_s = -1.0", "tracking.stationary_s"),
        ];
        for (table, key) in cases {
            match parse(&MINIMAL.replace("[[camera]]", &format!("{table}\n[[camera]]"))) {
                Err(ConfigError::Invalid { key: got, .. }) => assert_eq!(got, key),
                other => panic!("expected an invalid `{key}`, got {other:?}"),
            }
        }
        let replay =
            MINIMAL.replace("{ kind = \"synthetic\" }", "{ kind = \"images\", path = \"d\", replay_fps = 0.0 }");
        assert!(
            matches!(parse(&replay), Err(ConfigError::Invalid { key, .. }) if key == "camera[0].source.replay_fps")
        );
        let images = |keys: &str| {
            MINIMAL.replace("{ kind = \"synthetic\" }", &format!("{{ kind = \"images\", path = \"d\", {keys} }}"))
        };
        for keys in ["hold_s = -1.0", "hold_s = nan", "hold_s = 3.0, replay_fps = 10.0"] {
            assert!(
                matches!(parse(&images(keys)), Err(ConfigError::Invalid { key, .. }) if key == "camera[0].source.hold_s"),
                "{keys}"
            );
        }
        assert!(parse(&images("hold_s = 3.0")).is_ok());
    }

    #[test]
    fn dla_needs_a_reduced_precision() {
        let dla = |precision: &str| parse(&format!("{MINIMAL}\n[engine]\ndla_core = 0\nprecision = \"{precision}\"\n"));
        match dla("fp32") {
            Err(ConfigError::Invalid { key, message, .. }) => {
                assert_eq!(key, "engine.dla_core");
                assert!(message.contains("FP16") && message.contains("precision = \"fp16\""), "{message}");
            }
            other => panic!("dla_core with fp32 must be refused, got {other:?}"),
        }
        assert_eq!(dla("fp16").expect("valid").engine.dla_core, Some(0));
        assert!(dla("int8").is_ok());
    }

    #[test]
    fn partial_configs_get_every_other_key_from_the_default() {
        let default = embedded_default().expect("default");
        let threshold_only = parse("[model]\nscore_threshold = 0.7").expect("only a threshold");
        assert_eq!(threshold_only.model.score_threshold, 0.7);
        assert_eq!(threshold_only.model.onnx, default.model.onnx, "the bundled model, resolved in the data dir");
        assert_eq!(threshold_only.model.labels, default.model.labels);
        assert_eq!(threshold_only.model.input, default.model.input);
        assert_eq!(threshold_only.cameras.len(), 1, "the default's demo camera");
        assert_eq!(threshold_only.cameras[0].source, default.cameras[0].source);

        let camera_only =
            parse("[[camera]]\nname = \"door\"\nsource = { kind = \"images\", path = \"pics\" }").expect("one camera");
        assert_eq!(camera_only.cameras.len(), 1, "the user's cameras replace the default's");
        assert_eq!(camera_only.cameras[0].name, "door");
        assert_eq!(camera_only.cameras[0].fps, 0.0);
        assert_eq!(
            camera_only.cameras[0].source,
            SourceConfig::Images(ImagesConfig {
                path: "/base/pics".into(),
                mode: ImageMode::Loop,
                replay_fps: None,
                hold_s: None
            }),
            "a path the user sets resolves against the user's directory"
        );
        assert_eq!(camera_only.model.onnx, default.model.onnx);

        let broker_only = parse("[mqtt]\nhost = \"broker.lan\"").expect("only a broker");
        assert_eq!((mqtt(&broker_only).host.as_str(), mqtt(&broker_only).port), ("broker.lan", 1883));
        assert_eq!(mqtt(&broker_only).queue_capacity, mqtt(&default).queue_capacity);

        let empty = parse("").expect("an empty file is the default");
        assert_eq!(empty.model.onnx, default.model.onnx);
        assert!(default.model.onnx.as_ref().is_some_and(|p| p.starts_with(data_dir())), "{:?}", default.model.onnx);
    }

    #[test]
    fn nested_tables_merge_key_by_key() {
        let config = parse("[model.input]\nfilter = \"bilinear\"\n[mqtt]\nqos = 0").expect("valid");
        let default = embedded_default().expect("default");
        assert_eq!(config.model.input.filter, ResizeFilter::Bilinear);
        assert_eq!((config.model.input.width, config.model.input.dtype), (300, TensorDtype::U8));
        assert_eq!(mqtt(&config).qos, 0);
        assert_eq!(mqtt(&config).host, mqtt(&default).host);
    }

    #[test]
    fn a_user_onnx_needs_its_labels_and_leaves_what_it_does_not_set_to_recognition() {
        let err = parse("[model]\nonnx = \"yolov8n.onnx\"").unwrap_err();
        match &err {
            ConfigError::Invalid { key, message, .. } => {
                assert_eq!(key, "model.labels");
                assert!(message.contains("bundled model"), "{message}");
            }
            other => panic!("expected an invalid key, got {other:?}"),
        }
        let labelled = parse("[model]\nonnx = \"y.onnx\"\nlabels = \"l.txt\"").expect("labels are enough");
        assert_eq!(labelled.model.recognise, DESCRIPTION_KEYS, "everything else is recognised");
        let partly = "[model]\nonnx = \"y.onnx\"\nlabels = \"l.txt\"\ndecoder = \"yolov8\"\n\
                      input = { width = 640, height = 640, layout = \"nchw\" }";
        let old_style = parse(&partly.replace("layout = \"nchw\"", "layout = \"nchw\", dtype = \"f32\""))
            .expect("a model described as before recognition");
        assert!(old_style.model.recognise.is_empty(), "its other keys keep their defaults, as they always did");
        let described = parse(partly).expect("a partly described model");
        assert_eq!(described.model.onnx.as_deref(), Some(Path::new("/base/y.onnx")));
        assert_eq!(described.model.labels, Path::new("/base/l.txt"));
        assert_eq!(
            described.model.recognise,
            [
                "class_scores",
                "input.dtype",
                "input.color",
                "input.resize",
                "input.filter",
                "input.pad",
                "input.mean",
                "input.std"
            ]
        );
        assert!(parse("").expect("default").model.recognise.is_empty(), "the bundled model is described");
    }

    #[test]
    fn a_prebuilt_engine_alone_must_be_described() {
        let err = parse("[model]\nengine = \"y.engine\"\nlabels = \"l.txt\"").unwrap_err();
        assert!(
            matches!(&err, ConfigError::Invalid { key, message, .. }
            if key == "model.decoder" && message.contains("cannot be read")),
            "{err:?}"
        );
        let partly = "[model]\nengine = \"y.engine\"\nlabels = \"l.txt\"\ndecoder = \"yolov8\"\n\
                      input = { width = 640, height = 640, layout = \"nchw\" }";
        assert!(matches!(parse(partly), Err(ConfigError::Invalid { key, .. }) if key == "model.input.dtype"));
        let described = parse(&partly.replace("layout = \"nchw\"", "layout = \"nchw\", dtype = \"f32\""))
            .expect("a described engine");
        assert_eq!(described.model.input.pad, 114, "undescribed input keys keep their defaults");
        assert!(described.model.recognise.is_empty());
    }

    #[test]
    fn rtsp_and_csi_sources_take_short_forms_with_defaults() {
        let rtsp = MINIMAL.replace(
            "{ kind = \"synthetic\" }",
            "{ kind = \"rtsp\", url = \"rtsp://cam.lan:554/stream1\", user = \"admin\", password_file = \"cam.pw\" }",
        );
        let config = parse(&rtsp).expect("an rtsp camera");
        assert_eq!(
            config.cameras[0].source,
            SourceConfig::Rtsp(RtspConfig {
                url: "rtsp://cam.lan:554/stream1".into(),
                user: Some("admin".into()),
                password_file: Some("/base/cam.pw".into()),
                password_env: None,
                transport: RtspTransport::Tcp,
                latency_ms: 200,
            }),
            "the password file resolves against the user's directory"
        );
        let csi = parse(&MINIMAL.replace("{ kind = \"synthetic\" }", "{ kind = \"csi\" }")).expect("a csi camera");
        assert_eq!(
            csi.cameras[0].source,
            SourceConfig::Csi(CsiConfig { sensor_id: 0, width: 1920, height: 1080, fps: 30 })
        );
        assert_eq!(csi.cameras[0].max_frame_bytes(), 1920 * 1080 * 3 / 2);
    }

    #[test]
    fn credentials_in_an_rtsp_url_are_refused_without_repeating_them() {
        let source =
            |fields: &str| MINIMAL.replace("{ kind = \"synthetic\" }", &format!("{{ kind = \"rtsp\", {fields} }}"));
        let with_password = parse(&source("url = \"rtsp://admin:hunter2@cam.lan/s1\"")).unwrap_err();
        match &with_password {
            ConfigError::Invalid { key, message, .. } => {
                assert_eq!(key, "camera[0].source.url");
                assert!(message.contains("password_file"), "{message}");
            }
            other => panic!("expected an invalid url, got {other:?}"),
        }
        assert!(!with_password.to_string().contains("hunter2"), "{with_password}");
        for (fields, key) in [
            ("url = \"http://cam.lan/s1\"", "camera[0].source.url"),
            ("url = \"rtsp:///s1\"", "camera[0].source.url"),
            ("url = \"rtsp://cam.lan/s 1\"", "camera[0].source.url"),
            ("url = \"rtsp://cam.lan/s1\", password_env = \"PW\"", "camera[0].source.user"),
            (
                "url = \"rtsp://c/s\", user = \"u\", password_env = \"PW\", password_file = \"f\"",
                "camera[0].source.password_file",
            ),
            ("url = \"rtsp://cam.lan/s1\", latency_ms = 60000", "camera[0].source.latency_ms"),
        ] {
            assert!(
                matches!(parse(&source(fields)), Err(ConfigError::Invalid { key: k, .. }) if k == key),
                "{fields}: expected an error at {key}"
            );
        }
        assert!(parse(&source("url = \"RTSPS://cam.lan:322/s1?x=@\", transport = \"udp\"")).is_ok());
        let odd_csi = MINIMAL.replace("{ kind = \"synthetic\" }", "{ kind = \"csi\", width = 1921 }");
        assert!(matches!(parse(&odd_csi), Err(ConfigError::Invalid { key, .. }) if key == "camera[0].source"));
    }

    #[test]
    fn a_prebuilt_engine_replaces_the_default_onnx() {
        let text = MINIMAL.replace("onnx = \"m.onnx\"", "engine = \"/engines/m.engine\"");
        let config = parse(&text).expect("valid");
        assert_eq!(config.model.onnx, None);
        assert_eq!(config.model.engine.as_deref(), Some(Path::new("/engines/m.engine")));
    }

    #[test]
    fn unknown_keys_in_partial_files_name_file_and_key() {
        let err = parse("[mqtt]\nhots = \"broker\"").unwrap_err().to_string();
        assert!(err.contains("test.toml") && err.contains("`mqtt.hots`") && err.contains("`host`"), "{err}");
        let err = parse("verbose = true").unwrap_err().to_string();
        assert!(err.contains("test.toml") && err.contains("verbose"), "{err}");
        let err = parse("[[camera]]\nname = \"a\"\nsource = { kind = \"v4l2\", device = \"/dev/video0\" }")
            .unwrap_err()
            .to_string();
        assert!(err.contains("camera[0].source") && err.contains("width"), "{err}");
    }

    #[test]
    fn printed_config_reads_back_the_same_and_holds_no_password() {
        let dir = tempfile::tempdir().expect("tempdir");
        let password = dir.path().join("password");
        std::fs::write(&password, "hunter2-secret\n").expect("write password");
        let text = format!(
            "{MINIMAL}\n[mqtt]\nusername = \"u\"\npassword_file = {:?}\n[snapshot]\ninterval_s = 2.5",
            password.display().to_string()
        );
        let config = parse(&text).expect("valid");
        let printed = config.to_toml().expect("printable");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("score_threshold = 0.4\n"), "floats print as written: {printed}");
        let reread = parse(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
        assert_eq!(reread.to_toml().expect("printable"), printed);
        assert_eq!(mqtt(&reread).password_file.as_deref(), Some(password.as_path()));
        assert_eq!(mqtt(&reread).client_id, Some(mqtt(&config).client_id(&config)));
    }

    /// Found by `properties::random_configs_are_valid_and_usable_or_a_clear_error`: `[snapshot]
    /// interval_s = 1e30` and a camera's `fps = 1e-30` passed validation, then panicked converting
    /// the interval to a `Duration`. The publish rate limit converts the same way, and a replay rate
    /// that small overflows the replay clock after a few frames.
    #[test]
    fn rates_and_intervals_that_overflow_a_duration_are_refused() {
        let cases = [
            (format!("{MINIMAL}\n[snapshot]\ninterval_s = 1e30"), "snapshot.interval_s"),
            (MINIMAL.replace("name = \"front\"", "name = \"front\"\nfps = 1e-30"), "camera[0].fps"),
            (format!("{MINIMAL}\n[mqtt]\nmax_rate_hz = 1e-30"), "mqtt.max_rate_hz"),
            (format!("{MINIMAL}\n[mqtt]\nmax_rate_hz = -1.0"), "mqtt.max_rate_hz"),
            (
                MINIMAL.replace("{ kind = \"synthetic\" }", "{ kind = \"images\", path = \"d\", replay_fps = 1e-15 }"),
                "camera[0].source.replay_fps",
            ),
        ];
        assert_invalid_keys(cases);
        let daily = format!("{MINIMAL}\n[snapshot]\ninterval_s = 86400.0\n[mqtt]\nmax_rate_hz = 1.2e-5");
        let config = parse(&daily).expect("once a day is allowed");
        let _ = crate::publish::snapshot::Snapshotter::new(&config.snapshot);
        let _ = crate::publish::mqtt::policy::PublishPolicy::new(mqtt(&config).publish, mqtt(&config).max_rate_hz);
    }

    #[test]
    fn the_default_client_id_tells_machines_with_one_host_name_apart() {
        let machine = |machine_id: &str, serial: Option<&str>| {
            let root = tempfile::tempdir().expect("tempdir");
            std::fs::create_dir_all(root.path().join("etc")).expect("mkdir");
            std::fs::write(root.path().join("etc/machine-id"), machine_id).expect("write");
            if let Some(serial) = serial {
                std::fs::create_dir_all(root.path().join("proc/device-tree")).expect("mkdir");
                std::fs::write(root.path().join("proc/device-tree/serial-number"), serial).expect("write");
            }
            machine_suffix(root.path()).expect("a suffix")
        };
        let cloned_card = "4c4c4544004d3110804bc4c04f4e5a32\n";
        assert_ne!(machine(cloned_card, Some("1421021042031")), machine(cloned_card, Some("1421021042077")));
        assert_ne!(machine("a\n", None), machine("b\n", None));
        assert_eq!(machine("a\n", Some("1")), machine("a\n", Some("1")), "stable across starts");
        assert_eq!(machine("a\n", None).len(), 8);
        assert_eq!(machine_suffix(tempfile::tempdir().expect("tempdir").path()), None);
        let configured = parse("[mqtt]\nclient_id = \"mine\"").expect("valid");
        assert_eq!(mqtt(&configured).client_id(&configured), "mine");
    }

    #[test]
    fn a_topic_prefix_the_broker_would_drop_or_refuse_is_refused() {
        let long = "a".repeat(70_000);
        let bad = ["$SYS/x", "", "a//b", "/a", "a/", "a/+/b", "a/#", "a\u{0}b", long.as_str()];
        for key in ["mqtt.prefix", "homeassistant.discovery_prefix"] {
            for prefix in bad {
                let quoted = format!("\"{}\"", prefix.replace('\0', "\\u0000"));
                let text = match key {
                    "mqtt.prefix" => format!("[mqtt]\nprefix = {quoted}"),
                    _ => format!("[homeassistant]\ndiscovery_prefix = {quoted}"),
                };
                match parse(&text) {
                    Err(ConfigError::Invalid { key: got, .. }) => assert_eq!(got, key, "{prefix:.20}"),
                    other => panic!("{key} = {prefix:.20}: expected refused, got {other:?}"),
                }
            }
        }
        assert!(parse("[mqtt]\nprefix = \"site/cam-box_1\"").is_ok());
        assert!(parse(&format!(
            "[mqtt]\nprefix = {:?}",
            "a".repeat(crate::publish::mqtt::sections::MAX_TOPIC_PREFIX_BYTES)
        ))
        .is_ok());
    }

    /// Found by `properties::random_configs_are_valid_and_usable_or_a_clear_error`: an empty
    /// discovery prefix made topics start with `/`, and a repeated label made two sensors share a
    /// topic and unique id.
    #[test]
    fn home_assistant_discovery_topics_are_valid_and_distinct() {
        let cases = [
            ("[homeassistant]\ndiscovery_prefix = \"\"", "homeassistant.discovery_prefix"),
            ("[homeassistant]\ndiscovery_prefix = \"ha/\"", "homeassistant.discovery_prefix"),
            ("[homeassistant]\ndiscovery_prefix = \"ha/#\"", "homeassistant.discovery_prefix"),
            ("[homeassistant]\nlabels = [\"antialias\", \"antialias\"]", "homeassistant.labels"),
            ("[homeassistant]\nlabels = [\"traffic light\", \"Traffic_light\"]", "homeassistant.labels"),
        ];
        for (text, key) in cases {
            match parse(text) {
                Err(ConfigError::Invalid { key: got, .. }) => assert_eq!(got, key, "{text}"),
                other => panic!("expected an invalid `{key}`, got {other:?}"),
            }
        }
        assert!(parse("[homeassistant]\ndiscovery_prefix = \"home/ha\"\nlabels = [\"person\", \"car\"]").is_ok());
    }

    /// Issue 21: numbers that passed validation and then aborted, hung or retried forever.
    #[test]
    fn every_number_has_a_range_and_a_value_beyond_it_names_the_key() {
        let cases = [
            ("[engine]\nframe_slots = 1000000000000", "engine.frame_slots", "2..=16"),
            ("[engine]\nworkspace_mib = 4294967295", "engine.workspace_mib", "1..=65536"),
            ("[mqtt]\nshutdown_flush_ms = 1000000000000", "mqtt.shutdown_flush_ms", "0..=60000"),
            ("[mqtt]\nreconnect_max_ms = 1000000000000", "mqtt.reconnect_max_ms", "1..=600000"),
            ("[mqtt]\nport = 0", "mqtt.port", "1..=65535"),
            ("[mqtt]\nhost = \"127.0.0.1:24719\"", "mqtt.host", "mqtt.port"),
            ("[mqtt]\nhost = \"mqtt://broker\"", "mqtt.host", "scheme"),
            ("[mqtt]\nhost = \"bro ker\"", "mqtt.host", "spaces"),
            ("[telemetry]\ninterval_s = 4000000000", "telemetry.interval_s", "0..=86400"),
            ("[limits]\nmax_alloc_mib = 4000000000", "limits.max_alloc_mib", "1..=16384"),
            ("[limits]\nmax_width = 100000", "limits.max_width", "1..=65535"),
            ("[model]\nmax_detections = 100000000", "model.max_detections", "1..=10000"),
        ];
        for (table, key, wanted) in cases {
            let text = match table.strip_prefix("[model]\n") {
                Some(line) => MINIMAL.replace("decoder = \"ssd\"", &format!("decoder = \"ssd\"\n{line}")),
                None => format!("{table}\n{MINIMAL}"),
            };
            match parse(&text) {
                Err(ConfigError::Invalid { key: got, message, .. }) => {
                    assert_eq!(got, key, "{table}: {message}");
                    assert!(message.contains(wanted), "{table}: {message}");
                }
                other => panic!("{table}: expected an invalid `{key}`, got {other:?}"),
            }
        }
        let ipv6 = parse(&format!("[mqtt]\nhost = \"::1\"\n{MINIMAL}")).expect("an IPv6 address is a host");
        assert_eq!(mqtt(&ipv6).host, "::1");
        // A synthetic camera within the pixel limits but over the allocation limit.
        let big =
            MINIMAL.replace("{ kind = \"synthetic\" }", "{ kind = \"synthetic\", width = 16384, height = 16384 }");
        match parse(&big) {
            Err(ConfigError::Invalid { key, message, .. }) => {
                assert_eq!(key, "camera[0].source");
                assert!(message.contains("limits.max_alloc_mib"), "{message}");
            }
            other => panic!("expected an invalid camera[0].source, got {other:?}"),
        }
    }

    #[test]
    fn a_password_in_password_env_is_refused_without_being_echoed() {
        let text = format!("[mqtt]\nusername = \"u\"\npassword_env = \"hunter2 secret!\"\n{MINIMAL}");
        let error = parse(&text).expect_err("not a variable name");
        let message = error.to_string();
        assert!(message.contains("mqtt.password_env") && !message.contains("hunter2"), "{message}");
        for name in ["", "1ABC", "A-B", "A B", "Ä"] {
            let text = format!("[mqtt]\nusername = \"u\"\npassword_env = {name:?}\n{MINIMAL}");
            assert!(parse(&text).is_err(), "{name:?}");
        }
        let text = format!("[mqtt]\nusername = \"u\"\npassword_env = \"_MQTT_PASSWORD_2\"\n{MINIMAL}");
        assert!(parse(&text).is_ok());
    }

    #[test]
    fn a_config_that_is_not_a_regular_file_or_too_large_is_not_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let huge = dir.path().join("huge.toml");
        std::fs::File::create(&huge).and_then(|file| file.set_len(1 << 30)).expect("sparse file");
        for path in [Path::new("/dev/zero"), dir.path(), huge.as_path()] {
            match Config::load(path) {
                Err(ConfigError::Read { .. }) => {}
                other => panic!("{}: expected a read error, got {other:?}", path.display()),
            }
        }
    }

    #[test]
    fn a_public_url_with_a_path_is_refused_naming_the_key() {
        let text = format!("{MINIMAL}\n[http]\npublic_url = \"http://jetson.lan:8090/clips\"\n");
        assert!(matches!(parse(&text), Err(ConfigError::Invalid { key, .. }) if key == "http.public_url"));
    }

    #[test]
    fn duplicate_camera_names_are_rejected() {
        let text = format!("{MINIMAL}\n[[camera]]\nname = \"front\"\nsource = {{ kind = \"synthetic\" }}\n");
        assert!(matches!(parse(&text), Err(ConfigError::Invalid { key, .. }) if key == "camera[1].name"));
    }
}

/// Property tests: random TOML for every key gives a clear error or a config that works.
#[cfg(test)]
mod properties {
    use super::*;
    use crate::publish::mqtt::config::{HomeAssistantConfig, MqttConfig};
    use proptest::prelude::*;
    use proptest::strategy::BoxedStrategy;

    /// Cases per run on the host; see `proptest_support`.
    const CASES: u32 = 256;

    /// Keys the built-in default leaves commented out, with a value of the type they take.
    fn optional_keys() -> Vec<(Vec<String>, Value)> {
        let string = || Value::String("x".into());
        let tls: Table =
            toml::from_str("ca_file = \"ca.pem\"\nclient_cert = \"c.pem\"\nclient_key = \"k.pem\"").expect("tls table");
        [
            (&["device", "id"][..], string()),
            (&["model", "engine"], string()),
            (&["model", "input", "name"], string()),
            (&["engine", "cache_dir"], string()),
            (&["engine", "dla_core"], Value::Integer(0)),
            (&["engine", "store", "url"], Value::String("oci://registry.lan/fleet/engines".into())),
            (&["engine", "store", "public_key"], string()),
            (&["engine", "store", "signing_key"], string()),
            (&["engine", "store", "username"], string()),
            (&["engine", "store", "password_file"], string()),
            (&["engine", "store", "endpoint"], Value::String("http://storage.lan:8333".into())),
            (&["mqtt", "client_id"], string()),
            (&["mqtt", "prefix"], string()),
            (&["mqtt", "username"], string()),
            (&["mqtt", "password_file"], string()),
            (&["mqtt", "password_env"], string()),
            (&["mqtt", "tls"], Value::Table(tls)),
        ]
        .into_iter()
        .map(|(path, value)| (path.iter().map(|k| k.to_string()).collect(), value))
        .collect()
    }

    /// Strings a config is made of: every enum value, paths, topic-ish text, and odd ones.
    const WORDS: [&str; 45] = [
        "",
        "auto",
        "cpu",
        "tensorrt",
        "none",
        "error",
        "trace",
        "ssd",
        "yolov5",
        "yolov8",
        "end2end",
        "nchw",
        "nhwc",
        "u8",
        "f16",
        "f32",
        "rgb",
        "bgr",
        "stretch",
        "letterbox",
        "bilinear",
        "antialias",
        "fp32",
        "fp16",
        "int8",
        "images",
        "synthetic",
        "v4l2",
        "gstreamer",
        "mjpeg",
        "yuyv",
        "loop",
        "once",
        "detections",
        "every_frame",
        "on_change",
        "person",
        "models/samples",
        "/dev/video0",
        "videotestsrc ! appsink",
        "a+b/#",
        "front",
        "../x",
        "ünï©ødé",
        "sensor/",
    ];

    /// Every key of the built-in default (tables included, arrays not entered) and the optional
    /// ones, each with its default value as an example of the type it takes.
    fn schema_keys() -> Vec<(Vec<String>, Value)> {
        fn walk(table: &Table, prefix: &[String], out: &mut Vec<(Vec<String>, Value)>) {
            for (key, value) in table {
                let mut path = prefix.to_vec();
                path.push(key.clone());
                if let Value::Table(inner) = value {
                    walk(inner, &path, out);
                }
                out.push((path, value.clone()));
            }
        }
        let table: Table = toml::from_str(&crate::cmd::outlets::schema().default_text()).expect("the default parses");
        let mut keys = Vec::new();
        walk(&table, &[], &mut keys);
        keys.extend(optional_keys());
        keys
    }

    fn integer() -> impl Strategy<Value = i64> {
        prop_oneof![
            prop::sample::select(vec![0i64, 1, -1, 2, 3, 5, 30, 100, 255, 256, 300, 8192, 8193, 16384, 65535, 65536]),
            prop::sample::select(vec![i64::MAX, i64::MIN, i64::from(u32::MAX), i64::from(u32::MAX) + 1]),
            any::<i64>(),
        ]
    }

    fn float() -> impl Strategy<Value = f64> {
        prop_oneof![
            2 => prop::sample::select(vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, f64::MAX, f64::MIN_POSITIVE]),
            3 => prop::sample::select(vec![0.0, -0.0, 1e-30, 1e-5, 1.0 / 86_400.0, 0.5, 1.0, 1e30, -1.0, 255.0]),
            1 => 0.0f64..1.0,
            1 => -10.0f64..1000.0,
        ]
    }

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![prop::sample::select(WORDS.to_vec()).prop_map(String::from), "[a-z_/.+#]{0,12}"]
    }

    fn scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<bool>().prop_map(Value::Boolean),
            integer().prop_map(Value::Integer),
            float().prop_map(Value::Float),
            word().prop_map(Value::String),
        ]
    }

    /// Any TOML value, nested two levels.
    fn value() -> impl Strategy<Value = Value> {
        scalar().prop_recursive(2, 8, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z_]{1,10}", inner, 0..4)
                    .prop_map(|map| Value::Table(map.into_iter().collect())),
            ]
        })
    }

    /// A value of the same TOML type as `example` (tables: some of its keys, each like its value).
    fn like(example: &Value) -> BoxedStrategy<Value> {
        match example {
            Value::Boolean(_) => any::<bool>().prop_map(Value::Boolean).boxed(),
            Value::Integer(_) => integer().prop_map(Value::Integer).boxed(),
            Value::Float(_) => prop_oneof![float().prop_map(Value::Float), integer().prop_map(Value::Integer)].boxed(),
            Value::String(_) => word().prop_map(Value::String).boxed(),
            Value::Array(items) => {
                let item = items.first().map_or_else(|| word().prop_map(Value::String).boxed(), like);
                prop::collection::vec(item, 0..5).prop_map(Value::Array).boxed()
            }
            Value::Table(table) => {
                let entries: Vec<BoxedStrategy<Option<(String, Value)>>> = table
                    .iter()
                    .map(|(key, value)| {
                        let key = key.clone();
                        prop::option::of(like(value)).prop_map(move |v| v.map(|v| (key.clone(), v))).boxed()
                    })
                    .collect();
                entries.prop_map(|entries| Value::Table(entries.into_iter().flatten().collect())).boxed()
            }
            Value::Datetime(_) => value().boxed(),
        }
    }

    /// Mostly a value of the right type (often the example itself: enum keys take few values),
    /// sometimes anything.
    fn value_for(example: &Value) -> BoxedStrategy<Value> {
        prop_oneof![2 => Just(example.clone()), 4 => like(example), 1 => value()].boxed()
    }

    /// A `[[camera]]` table: a name, a source of some kind with most of that kind's keys (values
    /// mostly of the right type), maybe a key of another kind, maybe fps.
    fn camera() -> impl Strategy<Value = Value> {
        fn text(choices: &[&'static str]) -> BoxedStrategy<Value> {
            prop_oneof![4 => prop::sample::select(choices.to_vec()).prop_map(|s| Value::String(s.into())), 1 => value()]
                .boxed()
        }
        fn size() -> BoxedStrategy<Value> {
            let typical = prop::sample::select(vec![0i64, 1, 2, 3, 64, 480, 640, 16384, 16385, 20000]);
            prop_oneof![4 => typical.prop_map(Value::Integer), 1 => value()].boxed()
        }
        let kinds = vec!["images", "images", "synthetic", "synthetic", "v4l2", "v4l2", "gstreamer", "rtsp", "csi"];
        let source = prop::sample::select(kinds).prop_flat_map(|kind| {
            let keys: Vec<(&str, BoxedStrategy<Value>)> = match kind {
                "images" => {
                    vec![("path", text(&["models/samples", "pics", ""])), ("mode", text(&["loop", "once", "x"]))]
                }
                "synthetic" => vec![("width", size()), ("height", size())],
                "v4l2" => vec![
                    ("device", text(&["/dev/video0", ""])),
                    ("width", size()),
                    ("height", size()),
                    ("fps", size()),
                    ("format", text(&["mjpeg", "yuyv", "h264"])),
                ],
                "gstreamer" => vec![("pipeline", text(&["videotestsrc ! appsink", "fakesrc ! fakesink"]))],
                "rtsp" => vec![
                    ("url", text(&["rtsp://cam:554/s1", "rtsp://u:p@cam/s1", "http://cam", "rtsp://"])),
                    ("user", text(&["admin", ""])),
                    ("password_file", text(&["pw", ""])),
                    ("password_env", text(&["CAM_PASSWORD"])),
                    ("transport", text(&["tcp", "udp", "http"])),
                    ("latency_ms", size()),
                ],
                "csi" => vec![("sensor_id", size()), ("width", size()), ("height", size()), ("fps", size())],
                _ => vec![],
            };
            let entries: Vec<BoxedStrategy<Option<(String, Value)>>> = keys
                .into_iter()
                .map(|(key, strategy)| {
                    prop::option::weighted(0.9, strategy).prop_map(move |v| v.map(|v| (key.to_string(), v))).boxed()
                })
                .collect();
            let stray = prop::option::weighted(
                0.1,
                (prop::sample::select(vec!["path", "width", "pipeline", "extra"]), value()),
            );
            (Just(kind), entries, stray).prop_map(|(kind, entries, stray)| {
                let mut source: Table = entries.into_iter().flatten().collect();
                source.insert("kind".into(), Value::String(kind.into()));
                if let Some((key, value)) = stray {
                    source.insert(key.into(), value);
                }
                Value::Table(source)
            })
        });
        let name = prop_oneof![
            prop::sample::select(vec!["front", "back", "", "a/b", "x"]).prop_map(String::from),
            "[a-z]{1,8}",
        ];
        let fps = prop::option::of(value_for(&Value::Float(0.0)));
        (name, source, fps).prop_map(|(name, source, fps)| {
            let mut camera = Table::new();
            camera.insert("name".into(), Value::String(name));
            camera.insert("source".into(), source);
            if let Some(fps) = fps {
                camera.insert("fps".into(), fps);
            }
            Value::Table(camera)
        })
    }

    /// Sets `path` in `table`, creating tables on the way; a non-table in the way is replaced.
    fn set(table: &mut Table, path: &[String], value: Value) {
        let Some((first, rest)) = path.split_first() else { return };
        if rest.is_empty() {
            table.insert(first.clone(), value);
            return;
        }
        let entry = table.entry(first.clone()).or_insert_with(|| Value::Table(Table::new()));
        if !entry.is_table() {
            *entry = Value::Table(Table::new());
        }
        if let Value::Table(inner) = entry {
            set(inner, rest, value);
        }
    }

    /// A user's config: a few keys of the schema with random values, maybe cameras, maybe an
    /// unknown key.
    fn user_config() -> impl Strategy<Value = String> {
        let assignment =
            prop::sample::select(schema_keys()).prop_flat_map(|(path, example)| (Just(path), value_for(&example)));
        let assignments = prop::collection::vec(assignment, 0..6);
        let cameras = prop::option::of(prop::collection::vec(camera(), 0..3));
        let unknown = prop::option::weighted(0.1, ("[a-z]{1,6}", value()));
        (assignments, cameras, unknown).prop_map(|(assignments, cameras, unknown)| {
            let mut table = Table::new();
            for (path, value) in assignments {
                set(&mut table, &path, value);
            }
            if let Some(cameras) = cameras {
                table.insert("camera".into(), Value::Array(cameras));
            }
            if let Some((key, value)) = unknown {
                table.insert(key, value);
            }
            toml::to_string(&table).unwrap_or_default()
        })
    }

    /// What the daemon derives from a valid config at start must not fail on it either.
    fn assert_usable(config: &Config) {
        let printed = config.to_toml().expect("a valid config prints");
        let reread = crate::cmd::outlets::schema()
            .from_toml(&printed, ConfigOrigin::File("printed.toml".into()), Path::new("/base"))
            .unwrap_or_else(|e| panic!("the printed config does not read back: {e}\n{printed}"));
        assert_eq!(reread.to_toml().expect("prints"), printed);
        for camera in &config.cameras {
            let _ = camera.frame_interval();
            let _ = camera.max_frame_bytes();
        }
        let mqtt = MqttConfig::of(config);
        let _ = crate::publish::mqtt::policy::PublishPolicy::new(mqtt.publish, mqtt.max_rate_hz);
        let _ = crate::publish::snapshot::Snapshotter::new(&config.snapshot);
        let _ = crate::publish::mqtt::MqttSettings::from_config(config);
        let board = crate::publish::mqtt::homeassistant::BoardSensors { temperature: true, gpu_load: true };
        let context = crate::publish::mqtt::homeassistant::DiscoveryContext { config, sw_version: "test", board };
        let messages = crate::publish::mqtt::homeassistant::discovery_messages(&context);
        let mut with_discovery = config.clone();
        with_discovery.sections.get_mut::<HomeAssistantConfig>().expect("[homeassistant]").discovery = true;
        let mut topics = std::collections::BTreeSet::new();
        for message in &messages {
            let topic = message.topic.as_str();
            let prefix = &HomeAssistantConfig::of(config).discovery_prefix;
            assert!(!prefix.is_empty() && topic.starts_with(&format!("{prefix}/")), "{topic}");
            assert!(!topic.contains(['+', '#']) && !topic.contains("//"), "{topic}");
            assert!(
                topics.insert(topic) || crate::publish::mqtt::homeassistant::collision(&with_discovery).is_some(),
                "two discovery messages share {topic}, and the collision check missed it"
            );
        }
    }

    proptest! {
        #![proptest_config(crate::proptest_support::config(CASES))]

        #[test]
        fn random_configs_are_valid_and_usable_or_a_clear_error(text in user_config()) {
            let origin = ConfigOrigin::File("test.toml".into());
            match crate::cmd::outlets::schema().from_toml(&text, origin, Path::new("/base")) {
                Ok(config) => assert_usable(&config),
                Err(error) => {
                    // One mistake a line, each naming the file (and its place in it, when it has one).
                    let message = error.to_string();
                    let lines: Vec<&str> = message.lines().collect();
                    let each = if lines.len() > 1 { &lines[1..] } else { &lines[..] };
                    prop_assert!(each.iter().all(|line| line.trim_start().starts_with("test.toml")), "{}", message);
                }
            }
        }
    }
}
