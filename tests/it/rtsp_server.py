#!/usr/bin/env python3
"""A real RTSP server for the integration tests: Debian's gst-rtsp-server (through python3-gi)
serving a live test pattern at rtsp://127.0.0.1:PORT/test, as an IP camera does.

Usage: rtsp_server.py PORT [CODEC [WIDTHxHEIGHT [FPS]]]. CODEC is mjpeg (default), h264 (x264enc)
or h265 (x265enc). With RTSP_USER and RTSP_PASSWORD in the environment (not on the command line,
where every process can read it) the stream needs basic authentication. With
RTSP_SCENE=IMAGE:APPEAR:STAY:PERIOD the stream is a scene instead of the test pattern: a grey
frame, on which the picture IMAGE (scaled to the frame) appears APPEAR seconds into every PERIOD
seconds and stays STAY seconds; the scene's clock starts with the first client. RTSP_PATTERN picks
the test pattern (videotestsrc's, default ball) and RTSP_BITRATE_KBPS the H.264/H.265 bitrate
(x264enc's default otherwise), for benchmarks that need a camera's bitrate; RTSP_KEY_INTERVAL the
frames between two keyframes (10 otherwise). Prints "listening"
once the port is bound; exits with status 2 when it cannot bind (the port is taken). Runs until
killed.
"""

import os
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402

# rtpjpegpay takes 4:2:0 JPEG only: I420 before every encoder.
ENCODERS = {
    "mjpeg": "jpegenc ! rtpjpegpay name=pay0 pt=26",
    "h264": "x264enc tune=zerolatency speed-preset=ultrafast key-int-max=10"
    " ! rtph264pay name=pay0 pt=96 config-interval=-1",
    "h265": "x265enc tune=zerolatency speed-preset=ultrafast key-int-max=10"
    " ! rtph265pay name=pay0 pt=96 config-interval=-1",
}


def stream(codec: str, size: str, fps: str, scene: bool) -> str:
    width, height = size.split("x")
    pattern = os.environ.get("RTSP_PATTERN", "ball")
    source = "appsrc name=scene format=time" if scene else f"videotestsrc is-live=true pattern={pattern}"
    encoder = ENCODERS[codec]
    bitrate = os.environ.get("RTSP_BITRATE_KBPS")
    if bitrate and codec != "mjpeg":
        encoder = encoder.replace(" key-int-max=10", f" key-int-max=10 bitrate={int(bitrate)}", 1)
    key_interval = os.environ.get("RTSP_KEY_INTERVAL")
    if key_interval and codec != "mjpeg":
        encoder = encoder.replace(" key-int-max=10", f" key-int-max={int(key_interval)}", 1)
    return (
        f"( {source}"
        f" ! video/x-raw,format=I420,width={width},height={height},framerate={fps}/1"
        f" ! {encoder} )"
    )


def picture(path: str, width: int, height: int) -> bytes:
    """The image file at `path` as one I420 frame of `width` x `height`."""
    pipeline = Gst.parse_launch(
        f'filesrc location="{path}" ! decodebin ! videoconvert ! videoscale'
        f" ! video/x-raw,format=I420,width={width},height={height} ! appsink name=sink sync=false"
    )
    pipeline.set_state(Gst.State.PLAYING)
    sample = pipeline.get_by_name("sink").emit("pull-sample")
    pipeline.set_state(Gst.State.NULL)
    if sample is None:
        raise SystemExit(f"cannot decode {path}")
    buffer = sample.get_buffer()
    return buffer.extract_dup(0, buffer.get_size())


class Scene:
    """Feeds the appsrc `scene`: the grey frame, or the picture while it is due (see the module doc)."""

    def __init__(self, spec: str, size: str, fps: str):
        image, appear, stay, period = spec.rsplit(":", 3)
        width, height = (int(side) for side in size.split("x"))
        self.picture = picture(image, width, height)
        luma = width * height
        self.grey = bytes([128]) * (luma + luma // 2)
        self.appear, self.stay, self.period = float(appear), float(stay), float(period)
        self.fps = int(fps)
        self.frame = 0

    def configure(self, _factory, media) -> None:
        source = media.get_element().get_child_by_name("scene")
        source.connect("need-data", self.push)

    def push(self, source, _length) -> None:
        seconds = self.frame / self.fps
        shown = self.appear <= seconds % self.period < self.appear + self.stay
        buffer = Gst.Buffer.new_wrapped(self.picture if shown else self.grey)
        buffer.pts = self.frame * Gst.SECOND // self.fps
        buffer.duration = Gst.SECOND // self.fps
        self.frame += 1
        source.emit("push-buffer", buffer)


def require_basic_auth(server, factory, user: str, password: str) -> None:
    auth = GstRtspServer.RTSPAuth()
    token = GstRtspServer.RTSPToken()
    token.set_string("media.factory.role", user)
    auth.add_basic(GstRtspServer.RTSPAuth.make_basic(user, password), token)
    server.set_auth(auth)
    permissions = GstRtspServer.RTSPPermissions()
    permissions.add_permission_for_role(user, "media.factory.access", True)
    permissions.add_permission_for_role(user, "media.factory.construct", True)
    factory.set_permissions(permissions)


def main() -> int:
    port = sys.argv[1]
    codec = sys.argv[2] if len(sys.argv) > 2 else "mjpeg"
    size = sys.argv[3] if len(sys.argv) > 3 else "320x240"
    fps = sys.argv[4] if len(sys.argv) > 4 else "10"
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(port)
    factory = GstRtspServer.RTSPMediaFactory()
    spec = os.environ.get("RTSP_SCENE")
    factory.set_launch(stream(codec, size, fps, spec is not None))
    factory.set_shared(True)
    if spec is not None:
        factory.connect("media-configure", Scene(spec, size, fps).configure)
    user, password = os.environ.get("RTSP_USER"), os.environ.get("RTSP_PASSWORD")
    if user and password:
        require_basic_auth(server, factory, user, password)
    server.get_mount_points().add_factory("/test", factory)
    if server.attach(None) == 0:
        print(f"cannot listen on 127.0.0.1:{port}", file=sys.stderr, flush=True)
        return 2
    print("listening", flush=True)
    GLib.MainLoop().run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
