"""A small real RTSP server for Lucy's live-stream tests (GStreamer's gst-rtsp-server).

Run it with Debian's system Python, which has ``python3-gi`` and ``gir1.2-gst-rtsp-server-1.0`` (a virtual
environment usually does not)::

    /usr/bin/python3 tests/servers/rtsp_server.py --port 8554 [--path /cam] [--user U --password P] [--file F]

It serves H.264 over RTSP: by default a live test pattern (a moving ball with the running time drawn on it,
encoded with x264 at low latency and a keyframe every ``--key-int`` frames), or the H.264 video track of an MP4
file given with ``--file``. With ``--user``/``--password`` the stream needs basic authentication.

``--audio`` adds a sound track, as a camera with a microphone sends: ``tone`` (a live 440 Hz sine), the path of
a WAV file (played once, in real time), or with ``--file``, ``file`` (the MP4's own AAC track, unchanged).
Generated sound is encoded as ``--audio-codec`` (``aac``, the default, ``opus`` or ``pcmu``: G.711).
Once listening it prints one line, ``READY rtsp://127.0.0.1:<port><path>`` (without the credentials), and
it exits cleanly on SIGTERM or SIGINT. If the port cannot be bound it prints ``ERROR ...`` and exits 2.
"""

from __future__ import annotations

import argparse
import signal
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def _quoted(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


_AUDIO_CODECS = {  # --audio-codec: (encoder, caps before it, payloader)
    "aac": ("voaacenc", "", "rtpmp4gpay"),
    "opus": ("opusenc", "", "rtpopuspay"),
    "pcmu": ("mulawenc", "audio/x-raw,rate=8000 ! ", "rtppcmupay"),  # G.711, as many cameras send
}


def _audio_elements(args: argparse.Namespace) -> tuple[str, ...]:
    """The GStreamer elements the sound track needs."""
    if not args.audio:
        return ()
    if args.audio == "file":
        return ("aacparse", "rtpmp4gpay")
    encoder, _, payloader = _AUDIO_CODECS[args.audio_codec]
    if encoder == "voaacenc" and Gst.ElementFactory.find(encoder) is None:
        encoder = "avenc_aac"
    return ("audiotestsrc" if args.audio == "tone" else "wavparse", "audioconvert", "audioresample", encoder,
            payloader)


def _audio_branch(args: argparse.Namespace) -> str:
    """The launch fragment of the generated sound track (``pay1``), or '' without one."""
    if not args.audio or args.audio == "file":
        return ""
    if args.audio == "tone":
        source = "audiotestsrc is-live=true wave=sine freq=440 volume=0.3 ! audio/x-raw,rate=44100,channels=1"
    else:
        source = f"filesrc location={_quoted(args.audio)} ! wavparse"
    _, caps, _ = _AUDIO_CODECS[args.audio_codec]
    *_, encoder, payloader = _audio_elements(args)
    return f" {source} ! audioconvert ! audioresample ! {caps}{encoder} ! {payloader} name=pay1 pt=97"


def _pipeline(args: argparse.Namespace) -> str:
    if args.file:
        # The file's own H.264 track (and AAC track, with --audio file), unchanged: what an IP camera replaying
        # a recording would send.
        if args.audio == "file":
            return (f"( filesrc location={_quoted(args.file)} ! qtdemux name=d "
                    f"d.video_0 ! queue ! h264parse config-interval=-1 ! rtph264pay name=pay0 pt=96 "
                    f"d.audio_0 ! queue ! aacparse ! rtpmp4gpay name=pay1 pt=97 )")
        return (f"( filesrc location={_quoted(args.file)} ! qtdemux ! h264parse config-interval=-1 "
                f"! rtph264pay name=pay0 pt=96{_audio_branch(args)} )")
    # The running time drawn on the picture is a help when looking at stored frames, not a need (its plugin,
    # pango, comes with gstreamer1.0-x).
    overlay = ('! timeoverlay halignment=left valignment=top font-desc="Sans 18" '
               if Gst.ElementFactory.find("timeoverlay") else "")
    return (
        f"( videotestsrc is-live=true pattern=ball "
        f"! video/x-raw,width={args.width},height={args.height},framerate={args.fps}/1 "
        f"{overlay}! videoconvert ! video/x-raw,format=I420 "
        f"! x264enc tune=zerolatency speed-preset=ultrafast key-int-max={args.key_int} bitrate=400 "
        f"! video/x-h264,profile=baseline ! rtph264pay name=pay0 pt=96 config-interval=-1{_audio_branch(args)} )"
    )


def _require_auth(server: GstRtspServer.RTSPServer, factory: GstRtspServer.RTSPMediaFactory,
                  user: str, password: str) -> None:
    auth = GstRtspServer.RTSPAuth()
    token = GstRtspServer.RTSPToken()
    token.set_string(GstRtspServer.RTSP_TOKEN_MEDIA_FACTORY_ROLE, "user")
    auth.add_basic(GstRtspServer.RTSPAuth.make_basic(user, password), token)
    server.set_auth(auth)
    permissions = GstRtspServer.RTSPPermissions()
    permissions.add_permission_for_role("user", GstRtspServer.RTSP_PERM_MEDIA_FACTORY_ACCESS, True)
    permissions.add_permission_for_role("user", GstRtspServer.RTSP_PERM_MEDIA_FACTORY_CONSTRUCT, True)
    factory.set_permissions(permissions)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/stream", help="mount point (default /stream)")
    parser.add_argument("--file", help="serve the H.264 track of this MP4 file instead of a test pattern")
    parser.add_argument("--user", help="require basic authentication with this user ...")
    parser.add_argument("--password", help="... and this password")
    parser.add_argument("--fps", type=int, default=15)
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--key-int", type=int, default=15, help="frames between keyframes")
    parser.add_argument("--audio", help="add sound: 'tone', a WAV file, or 'file' (the --file's own AAC track)")
    parser.add_argument("--audio-codec", choices=sorted(_AUDIO_CODECS), default="aac",
                        help="how generated sound is encoded (default aac)")
    args = parser.parse_args(argv)
    if args.audio == "file" and not args.file:
        parser.error("--audio file needs --file")
    if (args.user is None) != (args.password is None):
        parser.error("--user and --password go together")
    if not args.path.startswith("/"):
        parser.error("--path must start with '/'")

    Gst.init(None)
    needed = ("filesrc", "qtdemux", "h264parse", "rtph264pay") if args.file else (
        "videotestsrc", "videoconvert", "x264enc", "rtph264pay")
    needed += _audio_elements(args)
    missing = [name for name in needed if Gst.ElementFactory.find(name) is None]
    if missing:  # fail here, not with an opaque error at the client's DESCRIBE
        print(f"ERROR missing GStreamer elements: {', '.join(missing)} (Debian: gstreamer1.0-plugins-base, "
              f"-good, -bad, -ugly)", flush=True)
        return 2
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(args.port))
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(_pipeline(args))
    factory.set_shared(True)  # every client (and a reconnecting one) joins the same running pipeline
    if args.user is not None:
        _require_auth(server, factory, args.user, args.password)
    server.get_mount_points().add_factory(args.path, factory)

    try:
        source_id = server.attach(None)
    except GLib.Error as err:  # older bindings raise, newer ones return 0
        source_id, reason = 0, err.message
    else:
        reason = "attach failed"
    if not source_id:
        print(f"ERROR cannot listen on 127.0.0.1:{args.port}: {reason}", flush=True)
        return 2

    loop = GLib.MainLoop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(GLib.PRIORITY_HIGH, signum, loop.quit)
    print(f"READY rtsp://127.0.0.1:{server.get_bound_port()}{args.path}", flush=True)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
