//! The camera's tap in a GStreamer pipeline: every parsed H.264/H.265 access unit on its way
//! into the decoder, handed to the camera's [`StreamTap`] (its recorder, its live feed).
//!
//! Owns: finding the decoder whose input is H.264/H.265 (the one this module's caller built for an
//! RTSP camera, or the first such decoder in a user's pipeline), the buffer probe on its sink pad,
//! and turning a buffer and its caps into an [`AccessUnit`] (the stream's framing and
//! configuration record from the caps, the keyframe flag, the capture time by the pipeline clock as
//! the frames get it). Must not: change what flows to the decoder (the probe only looks), wait, or
//! touch the decoder's output and its slot pool.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use gstreamer as gst;
use gstreamer::prelude::*;

use crate::source::tap::{AccessUnit, StreamFormat, StreamTap, VideoCodec};
use crate::sys::lock::lock;

/// The stream format of the caps a probe saw last.
type KnownFormat = Mutex<Option<(gst::Caps, Option<Arc<StreamFormat>>)>>;

/// Watches what enters `decoder`'s sink pad and hands each H.264/H.265 access unit to `tap`;
/// buffers of other codecs (an MJPEG camera) pass unseen, and the recorder gets raw frames then.
pub fn attach(decoder: &gst::Element, tap: StreamTap) -> bool {
    let Some(pad) = decoder.static_pad("sink") else { return false };
    let known: KnownFormat = Mutex::new(None);
    pad.add_probe(gst::PadProbeType::BUFFER, move |pad, info| {
        if let Some(buffer) = info.buffer() {
            if let Some(unit) = access_unit(pad, buffer, &known) {
                tap.offer_unit(unit);
            }
        }
        gst::PadProbeReturn::Ok
    });
    true
}

/// The first decoder in `pipeline` (searched recursively) whose input can be H.264 or H.265.
pub fn find_decoder(pipeline: &gst::Element) -> Option<gst::Element> {
    let bin = pipeline.clone().downcast::<gst::Bin>().ok()?;
    let compressed = gst::Caps::builder_full()
        .structure(gst::Structure::new_empty("video/x-h264"))
        .structure(gst::Structure::new_empty("video/x-h265"))
        .build();
    bin.iterate_recurse().into_iter().filter_map(Result::ok).find(|element| {
        let Some(factory) = element.factory() else { return false };
        factory.klass().contains("Decoder")
            && factory.static_pad_templates().iter().any(|template| {
                template.direction() == gst::PadDirection::Sink && template.caps().can_intersect(&compressed)
            })
    })
}

fn access_unit(pad: &gst::Pad, buffer: &gst::BufferRef, known: &KnownFormat) -> Option<AccessUnit> {
    let format = {
        let caps = pad.current_caps()?;
        let mut known = lock(known);
        match known.as_ref() {
            Some((seen, format)) if seen.as_ptr() == caps.as_ptr() => format.clone(),
            _ => {
                let format = stream_format(&caps).map(Arc::new);
                *known = Some((caps, format.clone()));
                format
            }
        }
    }?;
    let map = buffer.map_readable().ok()?;
    let nanos = |time: gst::ClockTime| Duration::from_nanos(time.nseconds());
    Some(AccessUnit {
        data: Arc::from(map.as_slice()),
        format,
        keyframe: !buffer.flags().contains(gst::BufferFlags::DELTA_UNIT),
        dts: buffer.dts().map(nanos),
        pts: buffer.pts().map(nanos),
        captured_at: captured_at(pad, buffer).unwrap_or_else(SystemTime::now),
    })
}

/// The stream format `caps` describe, if they are whole access units of H.264/H.265.
fn stream_format(caps: &gst::CapsRef) -> Option<StreamFormat> {
    let structure = caps.structure(0)?;
    let codec = match structure.name().as_str() {
        "video/x-h264" => VideoCodec::H264,
        "video/x-h265" => VideoCodec::H265,
        _ => return None,
    };
    if structure.get::<&str>("alignment").is_ok_and(|alignment| alignment != "au") {
        return None;
    }
    let codec_data: Option<Arc<[u8]>> = structure
        .get::<gst::Buffer>("codec_data")
        .ok()
        .and_then(|buffer| buffer.map_readable().ok().map(|map| Arc::from(map.as_slice())));
    let length_prefixed = structure.get::<&str>("stream-format").is_ok_and(|format| format != "byte-stream");
    let nal_length_size = match (&codec_data, length_prefixed) {
        (_, false) => None,
        (Some(record), true) => {
            let at = match codec {
                VideoCodec::H264 => 4,
                VideoCodec::H265 => 21,
            };
            Some((record.get(at)? & 3) + 1)
        }
        (None, true) => return None,
    };
    let size = |field: &str| structure.get::<i32>(field).ok().and_then(|v| u32::try_from(v).ok()).unwrap_or(0);
    Some(StreamFormat { codec, width: size("width"), height: size("height"), nal_length_size, codec_data })
}

/// When the buffer was captured, by the pipeline clock, as [`super::buffer::buffer_age`] stamps frames.
fn captured_at(pad: &gst::Pad, buffer: &gst::BufferRef) -> Option<SystemTime> {
    let pts = buffer.pts()?;
    let segment = pad.sticky_event::<gst::event::Segment>(0)?;
    let running = segment.segment().downcast_ref::<gst::ClockTime>()?.to_running_time(pts)?;
    let element = pad.parent_element()?;
    let now = element.clock()?.time();
    let age = super::buffer::age_at(now, element.base_time()?, running)?;
    Some(SystemTime::now() - age)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_say_the_framing_and_whole_access_units_only_are_taken() {
        if gst::init().is_err() {
            eprintln!("skipped: GStreamer cannot be initialised here");
            return;
        }
        let byte_stream: gst::Caps =
            "video/x-h264,stream-format=byte-stream,alignment=au,width=640,height=480".parse().expect("caps");
        let format = stream_format(&byte_stream).expect("h264");
        assert_eq!(
            (format.codec, format.width, format.height, format.nal_length_size),
            (VideoCodec::H264, 640, 480, None)
        );
        let avc: gst::Caps =
            "video/x-h264,stream-format=avc,alignment=au,codec_data=(buffer)0164001fffe1".parse().expect("caps");
        assert_eq!(stream_format(&avc).expect("avc").nal_length_size, Some(4));
        let nal: gst::Caps = "video/x-h265,stream-format=byte-stream,alignment=nal".parse().expect("caps");
        assert!(stream_format(&nal).is_none(), "NAL-aligned buffers are not access units");
        let jpeg: gst::Caps = "image/jpeg".parse().expect("caps");
        assert!(stream_format(&jpeg).is_none());
    }

    #[test]
    fn the_h264_decoder_of_a_users_pipeline_is_found() {
        if gst::init().is_err() || gst::ElementFactory::find("avdec_h264").is_none() {
            eprintln!("skipped: no avdec_h264 here");
            return;
        }
        let pipeline = gst::parse::launch("videotestsrc ! x264enc ! h264parse ! avdec_h264 name=dec ! fakesink")
            .expect("pipeline");
        assert_eq!(find_decoder(&pipeline).map(|e| e.name().to_string()), Some("dec".into()));
        let raw = gst::parse::launch("videotestsrc ! fakesink").expect("pipeline");
        assert!(find_decoder(&raw).is_none());
    }
}
