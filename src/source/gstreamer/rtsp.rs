//! An RTSP camera as a GStreamer pipeline built in code: `rtspsrc` with the credentials set as
//! properties, then, once the stream says its codec, the depayloader, parser, decoder and
//! converter [`super::decoder::choose_chain`] picks, into the appsink.
//!
//! Owns: [`RtspSpec`] (the camera's URL, user and password), what a refused login is reported as
//! ([`NOT_AUTHORIZED`]), reading the password (bounded, from
//! a file or the environment), and building the pipeline (with the recorder's tap on the
//! decoder's input when the camera records). Must not: put the password in a URL, a
//! description, a log line or an error (the URL is refused at config time when it holds
//! credentials), or link more than one video stream.

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gstreamer as gst;
use gstreamer::prelude::*;

use super::decoder::{choose_chain, Chain, Codec, ElementRegistry, GstRegistry};
use crate::source::rtsp_transport::RtspTransport;
use crate::source::tap::StreamTap;
use crate::sys::lock::lock;

/// What a camera that answers 401 is reported as (the appsink's bus reports it too).
pub(super) const NOT_AUTHORIZED: &str =
    "the camera refused the user name or password (not authorized): check `user` and `password_file`/`password_env`";

/// A password file larger than this is not a password file (a key, a log): refused unread.
pub const MAX_PASSWORD_FILE_BYTES: u64 = 4096;

/// A password that prints as `<redacted>`, so that no `{:?}` of a spec can leak it.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    pub fn new(password: String) -> Password {
        Password(password)
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Everything needed to connect to one RTSP camera.
#[derive(Debug, Clone)]
pub struct RtspSpec {
    /// The camera's name in the config, for log lines and errors.
    pub camera: String,
    /// Without credentials (config validation refuses a URL with `user:password@`).
    pub url: String,
    pub user: Option<String>,
    pub password: Option<Password>,
    pub transport: RtspTransport,
    pub latency_ms: u32,
}

impl RtspSpec {
    /// How logs and telemetry name this source.
    pub fn describe(&self) -> String {
        format!("rtsp:{} (camera {})", self.url, self.camera)
    }
}

/// The password a camera is configured with: the first line of `password_file` (read bounded),
/// or the variable `password_env`. Errors name the key and the file or variable, never the value.
pub fn read_password(password_file: Option<&Path>, password_env: Option<&str>) -> Result<Option<Password>, String> {
    match (password_file, password_env) {
        (Some(path), _) => read_password_file(path).map(Some),
        (None, Some(name)) => match std::env::var(name) {
            Ok(password) => Ok(Some(Password(password))),
            Err(_) => Err(format!("password_env: environment variable {name} is not set or not valid UTF-8")),
        },
        (None, None) => Ok(None),
    }
}

fn read_password_file(path: &Path) -> Result<Password, String> {
    let failed = |why: String| format!("password_file {}: {why}", path.display());
    // A regular file only, opened without blocking: a FIFO here must not hang the start. The size
    // is checked below, while reading.
    let (file, _) = crate::sys::files::open_regular(path, u64::MAX).map_err(|err| failed(err.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_PASSWORD_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|err| failed(err.to_string()))?;
    if bytes.len() as u64 > MAX_PASSWORD_FILE_BYTES {
        return Err(failed(format!(
            "larger than {MAX_PASSWORD_FILE_BYTES} bytes; its first line must be the password"
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| failed("not UTF-8 text".into()))?;
    let first_line = text.lines().next().unwrap_or_default();
    if first_line.is_empty() {
        return Err(failed("the first line is empty".into()));
    }
    Ok(Password(first_line.to_owned()))
}

/// `rtspsrc` for the camera, with the credentials set as properties.
fn make_source(spec: &RtspSpec) -> Result<gst::Element, String> {
    if !GstRegistry.has("rtspsrc") {
        return Err("no GStreamer element rtspsrc (apt-get install gstreamer1.0-plugins-good)".into());
    }
    let protocols = match spec.transport {
        RtspTransport::Tcp => "tcp",
        RtspTransport::Udp => "udp",
    };
    let mut source = gst::ElementFactory::make("rtspsrc")
        .property("location", &spec.url)
        .property("latency", spec.latency_ms)
        .property_from_str("protocols", protocols);
    if let Some(user) = &spec.user {
        source = source.property("user-id", user);
    }
    if let Some(Password(password)) = &spec.password {
        source = source.property("user-pw", password);
    }
    let source = source.build().map_err(|err| format!("cannot create rtspsrc: {err}"))?;
    cap_rtspsrc_debug();
    Ok(source)
}

/// rtspsrc's LOG debug level dumps every RTSP header it sends, `Authorization: Basic …` (the user
/// and password, merely base64-encoded) included: a `GST_DEBUG` that asks for it is capped at DEBUG
/// for rtspsrc (its category exists once an rtspsrc has been created), and the log says so once.
fn cap_rtspsrc_debug() {
    let Some(category) = gst::DebugCategory::get("rtspsrc") else { return };
    if category.threshold() > gst::DebugLevel::Debug {
        category.set_threshold(gst::DebugLevel::Debug);
        log::warn!(
            "GST_DEBUG asks for rtspsrc's LOG level, which prints the cameras' credentials; rtspsrc is capped at DEBUG"
        );
    }
}

/// Builds the pipeline `rtspsrc` → (chosen on the stream's caps) → `appsink`; the appsink is
/// named `sink` and is the caller's to configure. With `record`, the decoder's input (H.264 and
/// H.265 streams) is tapped for the camera's recorder and live feed. Errors are for elements that are not
/// installed.
pub fn build(spec: &RtspSpec, appsink: &gst::Element, record: Option<StreamTap>) -> Result<gst::Pipeline, String> {
    let source = make_source(spec)?;
    let pipeline = gst::Pipeline::new();
    pipeline.add_many([&source, appsink]).map_err(|err| format!("cannot assemble the pipeline: {err}"))?;
    let video_linked = Arc::new(AtomicBool::new(false));
    let (weak_pipeline, weak_sink, camera) = (pipeline.downgrade(), appsink.downgrade(), spec.camera.clone());
    source.connect_pad_added(move |source, pad| {
        let (Some(pipeline), Some(appsink)) = (weak_pipeline.upgrade(), weak_sink.upgrade()) else { return };
        if let Err(message) = link_stream(&pipeline, &appsink, pad, &video_linked, &camera, record.as_ref()) {
            gst::element_error!(source, gst::StreamError::CodecNotFound, ("{}", message));
        }
    });
    Ok(pipeline)
}

/// Links a new `rtspsrc` pad: the first video stream through the chosen chain into the appsink,
/// anything else (audio, a second video stream) into a fakesink so it cannot stall the session.
fn link_stream(
    pipeline: &gst::Pipeline,
    appsink: &gst::Element,
    pad: &gst::Pad,
    video_linked: &AtomicBool,
    camera: &str,
    record: Option<&StreamTap>,
) -> Result<(), String> {
    let caps = pad.current_caps().unwrap_or_else(|| pad.query_caps(None));
    let structure = caps.structure(0).ok_or("a stream without caps")?;
    let is_video = structure.get::<&str>("media").is_ok_and(|media| media == "video");
    if !is_video || video_linked.swap(true, Ordering::SeqCst) {
        let sink = gst::ElementFactory::make("fakesink")
            .property("sync", false)
            .property("async", false)
            .build()
            .map_err(|err| format!("cannot create fakesink: {err}"))?;
        pipeline.add(&sink).map_err(|err| err.to_string())?;
        sink.sync_state_with_parent().map_err(|err| err.to_string())?;
        let sink_pad = sink.static_pad("sink").ok_or("fakesink without a sink pad")?;
        return pad.link(&sink_pad).map(|_| ()).map_err(|err| format!("cannot link an extra stream: {err:?}"));
    }
    let encoding = structure.get::<&str>("encoding-name").unwrap_or("unknown");
    let codec = Codec::from_encoding_name(encoding)
        .ok_or_else(|| format!("the camera sends {encoding} video; supported: H.264, H.265 and MJPEG"))?;
    let chain = choose_chain(codec, &GstRegistry).map_err(|err| err.to_string())?;
    log::info!(
        "camera {camera}: {} stream, decoder {} ({})",
        codec.label(),
        chain.decoder,
        if chain.hardware { "hardware" } else { "software" }
    );
    let elements = make_chain(&chain)?;
    if let (Some(tap), Codec::H264 | Codec::H265) = (record, codec) {
        // The decoder is the element after the depayloader and the parser.
        if let Some(decoder) = elements.get(1 + usize::from(chain.parser.is_some())) {
            super::record_tap::attach(decoder, tap.clone());
        }
    }
    pipeline.add_many(&elements).map_err(|err| err.to_string())?;
    let mut linked: Vec<&gst::Element> = elements.iter().collect();
    linked.push(appsink);
    gst::Element::link_many(linked).map_err(|err| format!("cannot link {}: {err}", chain_text(&chain)))?;
    for element in &elements {
        element.sync_state_with_parent().map_err(|err| err.to_string())?;
    }
    let first = elements[0].static_pad("sink").ok_or("the depayloader has no sink pad")?;
    pad.link(&first).map(|_| ()).map_err(|err| format!("cannot link the stream to {}: {err:?}", chain.depayloader))
}

fn make_chain(chain: &Chain) -> Result<Vec<gst::Element>, String> {
    let names = [Some(chain.depayloader), chain.parser, Some(chain.decoder.as_str()), Some(chain.converter)];
    names
        .into_iter()
        .flatten()
        .map(|name| gst::ElementFactory::make(name).build().map_err(|err| format!("cannot create {name}: {err}")))
        .collect()
}

fn chain_text(chain: &Chain) -> String {
    let names = [Some(chain.depayloader), chain.parser, Some(chain.decoder.as_str()), Some(chain.converter)];
    names.into_iter().flatten().collect::<Vec<_>>().join(" ! ")
}

/// Asks the camera for its stream (RTSP DESCRIBE and SETUP, no decoding) and returns the codec of
/// its video, waiting at most `timeout`: what `probe` reports per camera. Errors say why not (the
/// camera is unreachable, refuses the password, or sends another codec).
pub fn stream_codec(spec: &RtspSpec, timeout: Duration) -> Result<Codec, String> {
    let source = make_source(spec)?;
    let pipeline = gst::Pipeline::new();
    pipeline.add(&source).map_err(|err| err.to_string())?;
    let found: Arc<Mutex<Option<String>>> = Arc::default();
    let (weak_pipeline, seen) = (pipeline.downgrade(), found.clone());
    source.connect_pad_added(move |_, pad| {
        let caps = pad.current_caps().unwrap_or_else(|| pad.query_caps(None));
        let Some(structure) = caps.structure(0) else { return };
        if structure.get::<&str>("media").is_ok_and(|media| media == "video") {
            let encoding = structure.get::<&str>("encoding-name").unwrap_or("unknown").to_owned();
            lock(&seen).get_or_insert(encoding);
        }
        // Every stream ends in a fakesink so the session can come up.
        let Some(pipeline) = weak_pipeline.upgrade() else { return };
        let Ok(sink) = gst::ElementFactory::make("fakesink").property("async", false).build() else { return };
        if pipeline.add(&sink).is_ok() && sink.sync_state_with_parent().is_ok() {
            if let Some(sink_pad) = sink.static_pad("sink") {
                let _ = pad.link(&sink_pad);
            }
        }
    });
    let bus = pipeline.bus().ok_or("the pipeline has no bus")?;
    let result = (|| {
        pipeline.set_state(gst::State::Playing).map_err(|_| "the RTSP source refused to start".to_owned())?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(encoding) = lock(&found).clone() {
                return Codec::from_encoding_name(&encoding)
                    .ok_or_else(|| format!("the camera sends {encoding} video; supported: H.264, H.265 and MJPEG"));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(format!("no video stream within {:.0} s", timeout.as_secs_f64()));
            }
            let step = gst::ClockTime::from_mseconds(((deadline - now).as_millis() as u64).min(100));
            if let Some(message) = bus.timed_pop_filtered(step, &[gst::MessageType::Error]) {
                if let gst::MessageView::Error(err) = message.view() {
                    return Err(if err.error().matches(gst::ResourceError::NotAuthorized) {
                        NOT_AUTHORIZED.to_owned()
                    } else {
                        err.error().to_string()
                    });
                }
            }
        }
    })();
    let _ = pipeline.set_state(gst::State::Null);
    result
}

/// The decoder each codec would get on this machine, for `probe` (the codec itself is known only
/// once the camera answers).
pub fn decoder_report(registry: &dyn ElementRegistry) -> serde_json::Value {
    let entries = Codec::ALL.into_iter().map(|codec| {
        let value = match choose_chain(codec, registry) {
            Ok(chain) => serde_json::json!({ "decoder": chain.decoder, "hardware": chain.hardware }),
            Err(missing) => serde_json::json!({ "error": missing.to_string() }),
        };
        (codec.label().to_owned(), value)
    });
    serde_json::Value::Object(entries.collect())
}

#[cfg(test)]
mod tests {
    use super::super::decoder::tests::FakeRegistry;
    use super::*;

    #[test]
    fn the_password_is_the_first_line_of_a_small_file_and_never_printed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("pw");
        std::fs::write(&path, "s3cret\nsecond line\n").expect("write");
        let password = read_password(Some(&path), None).expect("read").expect("a password");
        assert_eq!(password, Password::new("s3cret".into()));
        assert_eq!(format!("{password:?}"), "<redacted>");
        let spec = RtspSpec {
            camera: "gate".into(),
            url: "rtsp://cam/s".into(),
            user: Some("admin".into()),
            password: Some(password),
            transport: RtspTransport::Tcp,
            latency_ms: 200,
        };
        assert!(!format!("{spec:?}").contains("s3cret"));
        assert!(!spec.describe().contains("s3cret"));
    }

    #[test]
    fn credentials_transport_and_latency_are_rtspsrc_properties_and_the_url_stays_bare() {
        if gst::init().is_err() || !GstRegistry.has("rtspsrc") {
            eprintln!("skipped: no GStreamer with rtspsrc here");
            return;
        }
        let spec = RtspSpec {
            camera: "gate".into(),
            url: "rtsp://cam.lan:554/s1".into(),
            user: Some("admin".into()),
            password: Some(Password::new("s3cret".into())),
            transport: RtspTransport::Udp,
            latency_ms: 120,
        };
        let source = make_source(&spec).expect("rtspsrc");
        assert_eq!(source.property::<String>("location"), "rtsp://cam.lan:554/s1");
        assert_eq!(source.property::<String>("user-id"), "admin");
        assert_eq!(source.property::<String>("user-pw"), "s3cret");
        assert_eq!(source.property::<u32>("latency"), 120);
        let protocols = source.property_value("protocols").serialize().expect("serialise the flags");
        assert_eq!(protocols.as_str(), "GST_RTSP_LOWER_TRANS_UDP", "UDP only");
    }

    /// Issue 21: a FIFO or a device as the password file is refused at once, never read.
    #[test]
    fn a_password_file_that_is_a_fifo_or_a_device_is_refused_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: mkfifo reads the NUL-terminated path for the duration of the call only.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo");
        for path in [fifo.as_path(), Path::new("/dev/zero")] {
            let err = read_password(Some(path), None).unwrap_err();
            assert!(err.starts_with("password_file ") && err.contains("not a regular file"), "{err}");
        }
    }

    #[test]
    fn oversized_empty_and_missing_password_sources_are_errors_naming_the_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; MAX_PASSWORD_FILE_BYTES as usize + 1]).expect("write");
        let err = read_password(Some(&big), None).unwrap_err();
        assert!(err.starts_with("password_file ") && err.contains("larger than 4096"), "{err}");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\nx").expect("write");
        assert!(read_password(Some(&empty), None).unwrap_err().contains("first line is empty"));
        assert!(read_password(Some(&dir.path().join("none")), None).unwrap_err().contains("password_file"));
        let err = read_password(None, Some("JETSON_DETECTD_TEST_UNSET_CAMERA_PASSWORD")).unwrap_err();
        assert!(err.contains("password_env") && err.contains("JETSON_DETECTD_TEST_UNSET_CAMERA_PASSWORD"), "{err}");
        assert_eq!(read_password(None, None), Ok(None));
    }

    #[test]
    fn probe_reports_the_decoder_per_codec_or_what_is_missing() {
        let report = decoder_report(&FakeRegistry::desktop().without("avdec_h265"));
        assert_eq!(report["H.264"], serde_json::json!({ "decoder": "avdec_h264", "hardware": false }));
        assert!(report["H.265"]["error"].as_str().is_some_and(|e| e.contains("gstreamer1.0-libav")), "{report}");
        assert_eq!(report["MJPEG"]["decoder"], "jpegdec");
    }
}
