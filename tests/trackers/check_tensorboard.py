#!/usr/bin/python3
"""check_tensorboard.py: reads back every event file the `tensorboard` tracker wrote into one
folder and checks it the way TensorBoard would read it.

  check_tensorboard.py --pb DIR --tb DIR --jsonl FILE --manifest FILE [--resumed-at N]... [--files K]

--pb names a folder holding the Python modules `protoc --python_out` generated from
plugins/trackers/tensorboard/proto/*.proto. Checked, for every file in name order:
  - TFRecord framing: each record's masked CRC-32C of the length and of the data (the CRC is
    computed here, independently of the plugin), and no stray bytes after the last record;
  - the first record is file_version "brain.Event:2" and no other record is;
  - scalars: after TensorBoard's purge (a SessionLog START drops the points read so far whose
    step >= its step), the series of every tag equals metrics.jsonl: the same tags (metric
    "eval_x" -> tag "eval/x", any other "m" -> "train/m"), steps and float32 values;
  - text: every text tag's steps strictly increase; tag "manifest" holds manifest.toml as a
    fenced TOML block, first at step 0;
  - hparams: one "_hparams_/session_start_info" whose values equal the manifest flattened
    ("optimizer.lr", "trackers[1].use"), parsed here with Python's tomllib;
  - --resumed-at N: a SessionLog START at step N + 1.
Prints one "ok: ..." line and exits 0; exits 1 naming the first failure; exits 2 when this
Python lacks google.protobuf (tools/dev installs it into .venv/).
"""
import argparse
import json
import math
import os
import re
import struct
import sys


def fail(message):
    print("check_tensorboard: " + message, file=sys.stderr)
    sys.exit(1)


try:
    import google.protobuf  # noqa: F401 (only its presence is checked here)
except ImportError:
    print("check_tensorboard: " + sys.executable + " has no google.protobuf module; tools/dev installs "
          "it into .venv/ (tools/python-requirements.txt)", file=sys.stderr)
    sys.exit(2)


def crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


if crc32c(b"123456789") != 0xE3069283:  # the CRC-32C check value
    fail("this script's own CRC-32C is wrong")


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    """Yields the data of each record, checking the framing and both CRCs."""
    data = open(path, "rb").read()
    pos = 0
    while pos < len(data):
        if len(data) - pos < 12:
            fail("%s: %d stray bytes after the last record at offset %d" % (path, len(data) - pos, pos))
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if length_crc != masked_crc(header):
            fail("%s: bad length CRC at offset %d" % (path, pos))
        end = pos + 12 + length
        if end + 4 > len(data):
            fail("%s: record at offset %d is cut short" % (path, pos))
        body = data[pos + 12:end]
        (data_crc,) = struct.unpack("<I", data[end:end + 4])
        if data_crc != masked_crc(body):
            fail("%s: bad data CRC in the record at offset %d" % (path, pos))
        yield body
        pos = end + 4


def tag_of(metric):
    return "eval/" + metric[5:] if metric.startswith("eval_") and len(metric) > 5 else "train/" + metric


def as_float32(value):
    if value is None:  # jsonl writes non-finite values as null
        return math.nan
    if abs(value) > 3.4028234663852886e38:
        return math.copysign(math.inf, value)
    return struct.unpack("<f", struct.pack("<f", value))[0]


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def flatten(node, key, out):
    if isinstance(node, dict):
        for k, v in node.items():
            flatten(v, k if not key else key + "." + k, out)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            flatten(v, "%s[%d]" % (key, i), out)
    elif isinstance(node, bool):
        out[key] = ("bool_value", node)
    elif isinstance(node, (int, float)):
        out[key] = ("number_value", float(node))
    elif isinstance(node, str):
        out[key] = ("string_value", node)
    else:
        out[key] = ("string_value", None)  # dates: only the presence is compared


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pb", required=True)
    parser.add_argument("--tb", required=True)
    parser.add_argument("--jsonl", required=True)
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--resumed-at", type=int, action="append", default=[])
    parser.add_argument("--files", type=int)
    args = parser.parse_args()

    sys.path.insert(0, args.pb)
    import loom_tb_event_pb2 as event_pb2
    import loom_tb_hparams_pb2 as hparams_pb2
    import loom_tb_tensor_pb2 as tensor_pb2
    try:
        import tomllib
    except ImportError:
        fail("this Python (%s) has no tomllib; Python 3.11 or newer is needed" % sys.version.split()[0])

    names = sorted(n for n in os.listdir(args.tb) if "tfevents" in n)
    if not names:
        fail("no event files in " + args.tb)
    if args.files is not None and len(names) != args.files:
        fail("expected %d event files in %s, found %s" % (args.files, args.tb, names))
    for n in names:
        if not re.fullmatch(r"events\.out\.tfevents\.\d{10}\.[^/]+\.\d+\.loom", n):
            fail("unexpected event file name " + n)

    scalars, texts, starts, sessions = {}, {}, [], []
    count = 0
    for name in names:
        path = os.path.join(args.tb, name)
        for index, body in enumerate(records(path)):
            count += 1
            event = event_pb2.Event()
            event.ParseFromString(body)
            what = event.WhichOneof("what")
            where = "%s record %d (step %d)" % (name, index, event.step)
            if (index == 0) != (what == "file_version"):
                fail(where + ": file_version must be the first record and only the first")
            if what == "file_version" and event.file_version != "brain.Event:2":
                fail(where + ": file_version is %r" % event.file_version)
            if event.wall_time <= 0:
                fail(where + ": no wall_time")
            if what == "session_log":
                if event.session_log.status == event_pb2.SessionLog.START:
                    starts.append(event.step)
                    for series in list(scalars.values()) + list(texts.values()):  # TensorBoard's purge
                        series[:] = [p for p in series if p[0] < event.step]
            elif what == "summary":
                for value in event.summary.value:
                    plugin = value.metadata.plugin_data.plugin_name
                    kind = value.WhichOneof("value")
                    if kind == "simple_value":
                        if plugin != "scalars":
                            fail(where + ": scalar %s has plugin %r" % (value.tag, plugin))
                        scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
                    elif plugin == "text":
                        t = value.tensor
                        if t.dtype != tensor_pb2.DT_STRING or len(t.string_val) != 1 or len(t.tensor_shape.dim):
                            fail(where + ": text %s is not a DT_STRING scalar" % value.tag)
                        texts.setdefault(value.tag, []).append((event.step, t.string_val[0].decode("utf-8")))
                    elif plugin == "hparams":
                        if value.tag != "_hparams_/session_start_info":
                            fail(where + ": unexpected hparams tag " + value.tag)
                        data = hparams_pb2.HParamsPluginData()
                        data.ParseFromString(value.metadata.plugin_data.content)
                        if data.version != 0 or data.WhichOneof("data") != "session_start_info":
                            fail(where + ": hparams plugin data is not a version-0 session_start_info")
                        sessions.append((event.step, data.session_start_info))
                    else:
                        fail(where + ": value %s of unknown kind (plugin %r)" % (value.tag, plugin))
            elif what != "file_version":
                fail(where + ": unexpected record kind %r" % what)

    expected, previous = {}, None
    for number, line in enumerate(open(args.jsonl), 1):
        record = json.loads(line)
        step = record.pop("step")
        if previous is not None and step <= previous:
            fail("%s line %d: step %d after step %d" % (args.jsonl, number, step, previous))
        previous = step
        for metric, value in record.items():
            expected.setdefault(tag_of(metric), []).append((step, as_float32(value)))
    if set(scalars) != set(expected):
        fail("scalar tags %s, metrics.jsonl gives %s" % (sorted(scalars), sorted(expected)))
    points = 0
    for tag, want in expected.items():
        got = scalars[tag]
        if [s for s, _ in got] != [s for s, _ in want]:
            fail("%s: steps %s, metrics.jsonl has %s" % (tag, [s for s, _ in got], [s for s, _ in want]))
        for (step, g), (_, w) in zip(got, want):
            if not same(g, w):
                fail("%s at step %d: %r, metrics.jsonl has %r" % (tag, step, g, w))
        points += len(got)

    for tag, series in texts.items():
        steps = [s for s, _ in series]
        if steps != sorted(set(steps)):
            fail("text %s: steps %s repeat or go back" % (tag, steps))

    manifest_text = open(args.manifest, encoding="utf-8").read()
    if not manifest_text.endswith("\n"):
        manifest_text += "\n"
    manifest = texts.get("manifest")
    if not manifest or manifest[0][0] != 0:
        fail("no manifest text at step 0 (manifest: %s)" % [s for s, _ in manifest or []])
    for step, text in manifest:
        if text != "```toml\n" + manifest_text + "```\n":
            fail("manifest text at step %d differs from %s" % (step, args.manifest))

    if len(sessions) != 1 or sessions[0][0] != 0:
        fail("expected one hparams session_start_info at step 0, found %d" % len(sessions))
    want = {}
    flatten(tomllib.loads(manifest_text), "", want)
    got = sessions[0][1].hparams
    if set(got) != set(want):
        fail("hparams keys %s, manifest has %s" % (sorted(got), sorted(want)))
    for key, (field, value) in want.items():
        if got[key].WhichOneof("kind") != field or (value is not None and getattr(got[key], field) != value):
            fail("hparam %s is %s, manifest has %r" % (key, got[key], value))

    for n in args.resumed_at:
        if n + 1 not in starts:
            fail("resumed at step %d: no SessionLog START at step %d (STARTs at %s)" % (n, n + 1, starts))

    print("ok: %d files, %d records, %d scalar tags, %d points, %d hparams, START at %s"
          % (len(names), count, len(scalars), points, len(want), starts))


if __name__ == "__main__":
    main()
