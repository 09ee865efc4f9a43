//! Which GStreamer elements turn a camera's compressed stream into raw frames on this machine.
//!
//! Owns: the codecs an RTSP camera may send ([`Codec`]), the [`ElementRegistry`] view of the
//! GStreamer registry (which factories exist, their rank and klass) and the pure choice of the
//! depayloader, parser, decoder and converter for a codec ([`choose_chain`]): `nvv4l2decoder` on a
//! Jetson, else the highest-ranked hardware decoder, else software. Must not: build pipelines or
//! touch the network; the choice is a function of the registry alone, so it is tested against a
//! fake one.

use serde::Serialize;

/// A codec an RTSP stream may carry, as its RTP `encoding-name` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Codec {
    H264,
    H265,
    Mjpeg,
}

impl Codec {
    pub const ALL: [Codec; 3] = [Codec::H264, Codec::H265, Codec::Mjpeg];

    /// The codec of an RTP `encoding-name` (`H264`, `H265`, `JPEG`), case-insensitively.
    pub fn from_encoding_name(name: &str) -> Option<Codec> {
        match name.to_ascii_uppercase().as_str() {
            "H264" => Some(Codec::H264),
            "H265" => Some(Codec::H265),
            "JPEG" => Some(Codec::Mjpeg),
            _ => None,
        }
    }

    /// The name users know it by.
    pub fn label(self) -> &'static str {
        match self {
            Codec::H264 => "H.264",
            Codec::H265 => "H.265",
            Codec::Mjpeg => "MJPEG",
        }
    }

    /// The caps of the parsed elementary stream, which a decoder's sink pad must accept.
    pub fn parsed_caps(self) -> &'static str {
        match self {
            Codec::H264 => "video/x-h264",
            Codec::H265 => "video/x-h265",
            Codec::Mjpeg => "image/jpeg",
        }
    }

    fn depayloader(self) -> Element {
        match self {
            Codec::H264 => Element { name: "rtph264depay", package: GOOD },
            Codec::H265 => Element { name: "rtph265depay", package: GOOD },
            Codec::Mjpeg => Element { name: "rtpjpegdepay", package: GOOD },
        }
    }

    /// The parser between depayloader and decoder (hardware decoders want aligned access units).
    fn parser(self) -> Option<Element> {
        match self {
            Codec::H264 => Some(Element { name: "h264parse", package: BAD }),
            Codec::H265 => Some(Element { name: "h265parse", package: BAD }),
            Codec::Mjpeg => None,
        }
    }

    fn software_decoder(self) -> Element {
        match self {
            Codec::H264 => Element { name: "avdec_h264", package: LIBAV },
            Codec::H265 => Element { name: "avdec_h265", package: LIBAV },
            Codec::Mjpeg => Element { name: "jpegdec", package: GOOD },
        }
    }
}

const BASE: &str = "gstreamer1.0-plugins-base";
const GOOD: &str = "gstreamer1.0-plugins-good";
const BAD: &str = "gstreamer1.0-plugins-bad";
const LIBAV: &str = "gstreamer1.0-libav";

/// Jetson's NVDEC decoder (L4T's `nvidia-l4t-gstreamer`); it writes NVMM memory, which only
/// `nvvidconv` turns into system memory.
pub const JETSON_DECODER: &str = "nvv4l2decoder";
pub const JETSON_CONVERTER: &str = "nvvidconv";
const CONVERTER: Element = Element { name: "videoconvert", package: BASE };

/// An element the pipeline needs and the Debian package it comes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Element {
    name: &'static str,
    package: &'static str,
}

/// A decoder factory as the registry describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactoryInfo {
    pub name: String,
    /// GStreamer rank: 0 (none: never picked automatically), 64 marginal, 128 secondary, 256 primary.
    pub rank: i32,
    /// `Codec/Decoder/Video/Hardware` and the like.
    pub klass: String,
}

impl FactoryInfo {
    pub fn is_hardware(&self) -> bool {
        self.klass.split('/').any(|part| part == "Hardware")
    }
}

/// The parts of the GStreamer registry the choice depends on.
pub trait ElementRegistry {
    /// Whether an element factory of this name is installed.
    fn has(&self, name: &str) -> bool;
    /// Decoder factories whose sink pads accept `codec`'s parsed stream.
    fn decoders_for(&self, codec: Codec) -> Vec<FactoryInfo>;
}

/// The elements between the RTSP source and the appsink for one codec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Chain {
    pub depayloader: &'static str,
    pub parser: Option<&'static str>,
    pub decoder: String,
    /// Whether the decoder is a hardware one (NVDEC, VA-API, V4L2 stateless, …).
    pub hardware: bool,
    /// Turns the decoder's output into NV12 in system memory for the appsink.
    pub converter: &'static str,
}

/// An element the chain needs is not installed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no GStreamer element {element} to receive {codec} (apt-get install {package})")]
pub struct MissingElement {
    pub codec: &'static str,
    pub element: &'static str,
    pub package: &'static str,
}

/// Chooses the chain for `codec`: `nvv4l2decoder` + `nvvidconv` where the Jetson's decoder is
/// installed (H.264 and H.265), else the highest-ranked decoder whose klass says `Hardware` (rank
/// above none: a rank-0 decoder is one its plugin does not trust to be picked), else
/// the software decoder (`avdec_h264`, `avdec_h265`, `jpegdec`), else the highest-ranked decoder
/// of any kind.
pub fn choose_chain(codec: Codec, registry: &dyn ElementRegistry) -> Result<Chain, MissingElement> {
    let require = |element: Element| {
        if registry.has(element.name) {
            Ok(element.name)
        } else {
            Err(MissingElement { codec: codec.label(), element: element.name, package: element.package })
        }
    };
    let depayloader = require(codec.depayloader())?;
    let parser = codec.parser().map(require).transpose()?;
    let jetson =
        matches!(codec, Codec::H264 | Codec::H265) && registry.has(JETSON_DECODER) && registry.has(JETSON_CONVERTER);
    if jetson {
        return Ok(Chain {
            depayloader,
            parser,
            decoder: JETSON_DECODER.into(),
            hardware: true,
            converter: JETSON_CONVERTER,
        });
    }
    let converter = require(CONVERTER)?;
    let mut decoders: Vec<FactoryInfo> = registry.decoders_for(codec).into_iter().filter(|d| d.rank > 0).collect();
    // Highest rank first; the name breaks ties so the choice does not depend on registry order.
    decoders.sort_by(|a, b| b.rank.cmp(&a.rank).then_with(|| a.name.cmp(&b.name)));
    let software = codec.software_decoder();
    let decoder = decoders
        .iter()
        .find(|d| d.is_hardware())
        .map(|d| (d.name.clone(), true))
        .or_else(|| registry.has(software.name).then(|| (software.name.to_owned(), false)))
        .or_else(|| decoders.first().map(|d| (d.name.clone(), d.is_hardware())));
    let (decoder, hardware) =
        decoder.ok_or(MissingElement { codec: codec.label(), element: software.name, package: software.package })?;
    Ok(Chain { depayloader, parser, decoder, hardware, converter })
}

/// The registry GStreamer loaded (call after `gst::init`).
pub struct GstRegistry;

impl ElementRegistry for GstRegistry {
    fn has(&self, name: &str) -> bool {
        gstreamer::ElementFactory::find(name).is_some()
    }

    fn decoders_for(&self, codec: Codec) -> Vec<FactoryInfo> {
        use gstreamer::glib::translate::IntoGlib;
        use gstreamer::prelude::*;
        let caps = gstreamer::Caps::new_empty_simple(codec.parsed_caps());
        gstreamer::ElementFactory::factories_with_type(gstreamer::ElementFactoryType::DECODER, gstreamer::Rank::NONE)
            .into_iter()
            .filter(|factory| factory.can_sink_any_caps(&caps))
            .map(|factory| FactoryInfo {
                name: factory.name().to_string(),
                rank: factory.rank().into_glib(),
                klass: factory.klass().to_owned(),
            })
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A registry holding exactly the given element names and decoders.
    #[derive(Default)]
    pub struct FakeRegistry {
        pub elements: Vec<&'static str>,
        pub decoders: Vec<(Codec, FactoryInfo)>,
    }

    impl FakeRegistry {
        /// What Debian with plugins base, good, bad and libav has: depayloaders, parsers,
        /// videoconvert and the software decoders.
        pub fn desktop() -> FakeRegistry {
            let mut registry = FakeRegistry {
                elements: vec![
                    "rtspsrc",
                    "rtph264depay",
                    "rtph265depay",
                    "rtpjpegdepay",
                    "h264parse",
                    "h265parse",
                    "videoconvert",
                    "appsink",
                    "fakesink",
                ],
                decoders: Vec::new(),
            };
            registry.decoder(Codec::H264, "avdec_h264", 256, "Codec/Decoder/Video");
            registry.decoder(Codec::H265, "avdec_h265", 256, "Codec/Decoder/Video");
            registry.decoder(Codec::Mjpeg, "jpegdec", 256, "Codec/Decoder/Image");
            registry
        }

        pub fn decoder(&mut self, codec: Codec, name: &'static str, rank: i32, klass: &str) {
            self.elements.push(name);
            self.decoders.push((codec, FactoryInfo { name: name.into(), rank, klass: klass.into() }));
        }

        pub fn without(mut self, name: &str) -> FakeRegistry {
            self.elements.retain(|element| *element != name);
            self.decoders.retain(|(_, decoder)| decoder.name != name);
            self
        }
    }

    impl ElementRegistry for FakeRegistry {
        fn has(&self, name: &str) -> bool {
            self.elements.contains(&name)
        }
        fn decoders_for(&self, codec: Codec) -> Vec<FactoryInfo> {
            self.decoders.iter().filter(|(c, _)| *c == codec).map(|(_, d)| d.clone()).collect()
        }
    }

    #[test]
    fn software_decoders_are_chosen_where_there_is_no_hardware() {
        let registry = FakeRegistry::desktop();
        let h264 = choose_chain(Codec::H264, &registry).expect("h264");
        assert_eq!(
            h264,
            Chain {
                depayloader: "rtph264depay",
                parser: Some("h264parse"),
                decoder: "avdec_h264".into(),
                hardware: false,
                converter: "videoconvert",
            }
        );
        assert_eq!(choose_chain(Codec::H265, &registry).expect("h265").decoder, "avdec_h265");
        let mjpeg = choose_chain(Codec::Mjpeg, &registry).expect("mjpeg");
        assert_eq!((mjpeg.depayloader, mjpeg.parser, mjpeg.decoder.as_str()), ("rtpjpegdepay", None, "jpegdec"));
    }

    #[test]
    fn the_jetson_decoder_wins_for_h264_and_h265_with_its_converter() {
        let mut registry = FakeRegistry::desktop();
        registry.elements.extend([JETSON_DECODER, JETSON_CONVERTER]);
        // A hardware decoder of higher rank must not beat the Jetson's own.
        registry.decoder(Codec::H264, "vah264dec", 512, "Codec/Decoder/Video/Hardware");
        for codec in [Codec::H264, Codec::H265] {
            let chain = choose_chain(codec, &registry).expect("jetson");
            assert_eq!((chain.decoder.as_str(), chain.hardware, chain.converter), (JETSON_DECODER, true, "nvvidconv"));
        }
        assert_eq!(choose_chain(Codec::Mjpeg, &registry).expect("mjpeg").decoder, "jpegdec");
    }

    #[test]
    fn the_highest_ranked_hardware_decoder_beats_software_and_rank_none_is_never_picked() {
        let mut registry = FakeRegistry::desktop();
        registry.decoder(Codec::H264, "vah264dec", 257, "Codec/Decoder/Video/Hardware");
        registry.decoder(Codec::H264, "nvh264dec", 258, "Codec/Decoder/Video/Hardware");
        registry.decoder(Codec::H264, "v4l2slh264dec", 0, "Codec/Decoder/Video/Hardware");
        registry.decoder(Codec::H265, "v4l2slh265dec", 0, "Codec/Decoder/Video/Hardware");
        let h264 = choose_chain(Codec::H264, &registry).expect("h264");
        assert_eq!((h264.decoder.as_str(), h264.hardware, h264.converter), ("nvh264dec", true, "videoconvert"));
        let h265 = choose_chain(Codec::H265, &registry).expect("h265");
        assert_eq!((h265.decoder.as_str(), h265.hardware), ("avdec_h265", false));
    }

    #[test]
    fn without_the_preferred_software_decoder_the_best_ranked_other_one_is_used() {
        let mut registry = FakeRegistry::desktop().without("avdec_h264");
        registry.decoder(Codec::H264, "openh264dec", 64, "Decoder/Video");
        assert_eq!(choose_chain(Codec::H264, &registry).expect("h264").decoder, "openh264dec");
    }

    #[test]
    fn a_missing_element_is_named_with_its_package() {
        let no_decoder = choose_chain(Codec::H265, &FakeRegistry::desktop().without("avdec_h265")).unwrap_err();
        assert_eq!(
            no_decoder.to_string(),
            "no GStreamer element avdec_h265 to receive H.265 (apt-get install gstreamer1.0-libav)"
        );
        let no_parser = choose_chain(Codec::H264, &FakeRegistry::desktop().without("h264parse")).unwrap_err();
        assert_eq!((no_parser.element, no_parser.package), ("h264parse", "gstreamer1.0-plugins-bad"));
        let no_depay = choose_chain(Codec::Mjpeg, &FakeRegistry::desktop().without("rtpjpegdepay")).unwrap_err();
        assert_eq!(no_depay.element, "rtpjpegdepay");
    }

    #[test]
    fn encoding_names_map_to_codecs() {
        assert_eq!(Codec::from_encoding_name("H264"), Some(Codec::H264));
        assert_eq!(Codec::from_encoding_name("h265"), Some(Codec::H265));
        assert_eq!(Codec::from_encoding_name("JPEG"), Some(Codec::Mjpeg));
        assert_eq!(Codec::from_encoding_name("MP4V-ES"), None);
    }
}
