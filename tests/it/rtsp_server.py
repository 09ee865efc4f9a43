#!/usr/bin/env python3
"""A real RTSP server for the integration tests: Debian's gst-rtsp-server (through python3-gi)
serving a live MJPEG test pattern at rtsp://127.0.0.1:PORT/test.

Usage: rtsp_server.py PORT. Prints "listening" once the port is bound; exits with status 2 when it
cannot bind (the port is taken). Runs until killed.
"""

import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402

# rtpjpegpay takes 4:2:0 JPEG only: I420 before jpegenc.
STREAM = (
    "( videotestsrc is-live=true pattern=ball"
    " ! video/x-raw,format=I420,width=320,height=240,framerate=10/1"
    " ! jpegenc ! rtpjpegpay name=pay0 pt=26 )"
)


def main() -> int:
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(sys.argv[1])
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(STREAM)
    factory.set_shared(True)
    server.get_mount_points().add_factory("/test", factory)
    if server.attach(None) == 0:
        print(f"cannot listen on 127.0.0.1:{sys.argv[1]}", file=sys.stderr, flush=True)
        return 2
    print("listening", flush=True)
    GLib.MainLoop().run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
