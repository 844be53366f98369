#!/usr/bin/env python3
"""Checks .pftrace files with Perfetto's official schema, independently of the
Rust code that wrote them.

Usage:
    .tools/py/bin/python tools/pftrace_check.py [--concat] [--dump-slices] [--inflate OUT] FILE...

The decoder is the `perfetto` package's generated classes for the whole trace
schema (install them with scripts/install-perfetto.sh). For each file, and with
--concat also for all the files concatenated in the order given, it checks:

- a packet holding `compressed_packets` holds nothing else, and its bytes
  inflate (zlib) to a run of `Trace.packet` entries with no compressed packet
  among them; every check below then reads the inflated packets in place of
  the compressed one, as the trace processor does (so byte offsets in
  messages are offsets in the inflated trace, which --inflate writes out);
- the bytes decode as a `perfetto.protos.Trace` holding at least one packet,
  and no message anywhere in it carries a field the schema does not know;
- no repeated scalar field of a TrackEvent (or of TrackEventDefaults) is
  packed: the schema declares them unpacked and Perfetto's own decoder reads
  them one value per key, while this decoder (and protoc) would accept either
  form, so the raw bytes are walked for it;
- every packet is on a sequence (`trusted_packet_sequence_id`), and the first
  packet of each sequence clears its incremental state; a sequence is cleared
  only once (a second clear means two files share a sequence id);
- every interned id (event names, categories, debug-annotation names) is
  non-zero and resolves to interned data given earlier on its own sequence,
  and a packet that uses interned data or an incremental clock says so with
  SEQ_NEEDS_INCREMENTAL_STATE;
- no clock snapshot gives a machine-wide clock (MONOTONIC, BOOTTIME) a value
  below the one an earlier snapshot in the file gave it: the trace processor
  refuses such a snapshot (`invalid_clock_snapshots`), which is what
  concatenating captures out of time order does;
- every timestamp converts to CLOCK_MONOTONIC: sequence-scoped clocks through
  a clock snapshot on their own sequence, BOOTTIME through a snapshot that
  relates it to MONOTONIC;
- every track uuid is declared once, before its first event, and every parent
  track is declared; thread tracks name their pid and tid, process tracks
  their pid;
- on each track, ordered by time as the trace processor orders them, slices
  nest as a stack: each end closes the innermost open slice, and none is left
  open at the end of the trace;
- counter events (TYPE_COUNTER) carry a value and sit on counter tracks (a
  track descriptor with a CounterDescriptor, whose unit or unit_name is set),
  and counter tracks hold nothing else;
- a track event's extra_counter_track_uuids and extra_counter_values pair up
  one to one, and name declared counter tracks; a counter track of the
  built-in type COUNTER_THREAD_TIME_NS is the child of a thread track (the
  trace processor reads its values on a slice's begin and end as the slice's
  thread timestamp and thread duration).

- every flow id a track event ends (`terminating_flow_ids`) is begun by
  another event's `flow_ids`, no later than the end, and ends once: the trace
  processor drops a terminating id it has not seen begun.

--dump-slices prints each slice, instant and counter value as one JSON line
on stdout:
  {"kind": "slice", "pid": .., "tid": .., "thread": .., "track": .., "name": ..,
   "category": .., "begin_ns": .., "end_ns": .., "args": {..}}
  {"kind": "counter", "pid": .., "track": .., "unit": .., "ts_ns": .., "value": ..}
A slice whose begin and end sample a COUNTER_THREAD_TIME_NS track also has
"thread_ts_ns" (the reading at its begin) and "thread_dur_ns" (end minus
begin), as the trace processor's slice table has thread_ts and thread_dur.
Values of extra counters are dumped as counter records of their tracks.
Thread tracks carry pid, tid and thread; process tracks pid and process;
external lanes carry "lane" (the parent track's name) instead; a track of
its own under a process's track (a span that ran in pieces) carries "pid" and
"async" (its uuid); counter tracks
the pid of their parent process. A track event's `flow_ids` and
`terminating_flow_ids` are in its args under those names. Times are
CLOCK_MONOTONIC nanoseconds. With
--concat only the concatenation is dumped.

--inflate OUT writes the trace with every compressed packet replaced by the
packets it holds (the concatenation with --concat, else the one FILE), for
`protoc --decode=perfetto.protos.Trace` to print in full.

Exit status: 0 when every check passed, 1 with one line on stderr per failure,
2 when the files or the decoder cannot be used.
"""

import argparse
import json
import sys
import zlib

INSTALL_HINT = "run scripts/install-perfetto.sh and use .tools/py/bin/python"

try:
    from google.protobuf import unknown_fields
    from google.protobuf.descriptor import FieldDescriptor
    from google.protobuf.message import DecodeError
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
except ImportError as e:
    print(f"pftrace_check: the official Perfetto schema classes are not importable ({e}); {INSTALL_HINT}",
          file=sys.stderr)
    sys.exit(2)

SEQ_CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
SEQ_NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
TYPE_BEGIN = pb.TrackEvent.TYPE_SLICE_BEGIN
TYPE_END = pb.TrackEvent.TYPE_SLICE_END
TYPE_INSTANT = pb.TrackEvent.TYPE_INSTANT
TYPE_COUNTER = pb.TrackEvent.TYPE_COUNTER
CLOCK_MONOTONIC = pb.BUILTIN_CLOCK_MONOTONIC
CLOCK_BOOTTIME = pb.BUILTIN_CLOCK_BOOTTIME
SEQUENCE_CLOCKS = range(64, 128)

# The fields of TrackEvent that must never be packed, as the project's design
# notes list them. The schema is the authority: the list used is derived from
# it, and this one only guards against the derivation going wrong.
KNOWN_UNPACKED = {3, 12, 31, 45, 46, 47, 48}

# Field numbers used by the raw walk.
TRACE_PACKET = pb.Trace.DESCRIPTOR.fields_by_name["packet"].number
PACKET_TRACK_EVENT = pb.TracePacket.DESCRIPTOR.fields_by_name["track_event"].number
PACKET_DEFAULTS = pb.TracePacket.DESCRIPTOR.fields_by_name["trace_packet_defaults"].number
PACKET_COMPRESSED = pb.TracePacket.DESCRIPTOR.fields_by_name["compressed_packets"].number
DEFAULTS_TRACK_EVENT = pb.TracePacketDefaults.DESCRIPTOR.fields_by_name["track_event_defaults"].number

MAX_ERRORS_SHOWN = 40

NOT_SCALAR = {FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP, FieldDescriptor.TYPE_STRING,
              FieldDescriptor.TYPE_BYTES}


def unpacked_repeated_scalars(descriptor):
    """{field number: name} of the repeated scalar fields the schema declares unpacked."""
    return {f.number: f.name for f in descriptor.fields
            if f.is_repeated and f.type not in NOT_SCALAR and not f.is_packed}


TRACK_EVENT_UNPACKED = unpacked_repeated_scalars(pb.TrackEvent.DESCRIPTOR)
DEFAULTS_UNPACKED = unpacked_repeated_scalars(pb.TrackEventDefaults.DESCRIPTOR)


class Errors:
    """Failures of one input, each with where it was found."""

    def __init__(self, label):
        self.label = label
        self.items = []

    def add(self, where, message):
        self.items.append(f"{self.label}: {where}: {message}")

    def report(self):
        for line in self.items[:MAX_ERRORS_SHOWN]:
            print(line, file=sys.stderr)
        if len(self.items) > MAX_ERRORS_SHOWN:
            print(f"{self.label}: ... and {len(self.items) - MAX_ERRORS_SHOWN} more failures", file=sys.stderr)


# --- the raw walk: bytes the decoder would accept either way --------------------------------


class RawError(Exception):
    pass


def read_varint(buf, pos):
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise RawError("a varint runs past the end of its message")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise RawError("a varint is longer than ten bytes")


def raw_fields(buf, base):
    """Yields (field number, wire type, value, offset of the key) for each field
    of the message in `buf`; length-delimited values as (start, end) in `buf`.
    `base` is the offset of `buf` in the file, for messages."""
    pos = 0
    while pos < len(buf):
        at = base + pos
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            value, pos = None, pos + 8
        elif wire == 2:
            length, pos = read_varint(buf, pos)
            value, pos = (pos, pos + length), pos + length
        elif wire == 5:
            value, pos = None, pos + 4
        else:
            raise RawError(f"field {number} has wire type {wire}, which no current encoder writes")
        if pos > len(buf):
            raise RawError(f"field {number} runs past the end of its message")
        yield number, wire, value, at


def check_unpacked(buf, base, forbidden, message, where, errors):
    for number, wire, _, at in raw_fields(buf, base):
        if wire == 2 and number in forbidden:
            errors.add(f"{where}, byte {at}",
                       f"{message}.{forbidden[number]} (field {number}) is packed; the schema declares it "
                       f"unpacked and Perfetto's decoder misreads a packed run")


def check_raw(data, errors):
    buf = memoryview(data)
    try:
        for index, (number, wire, value, at) in enumerate(raw_fields(buf, 0)):
            if number != TRACE_PACKET or wire != 2:
                errors.add(f"byte {at}", f"top-level field {number} (wire type {wire}) is not Trace.packet")
                continue
            start, end = value
            packet = buf[start:end]
            where = f"packet {index}"
            for pnum, pwire, pvalue, pat in raw_fields(packet, start):
                if pwire != 2:
                    continue
                inner = packet[pvalue[0]:pvalue[1]]
                inner_base = start + pvalue[0]
                if pnum == PACKET_TRACK_EVENT:
                    check_unpacked(inner, inner_base, TRACK_EVENT_UNPACKED, "TrackEvent", where, errors)
                elif pnum == PACKET_DEFAULTS:
                    for dnum, dwire, dvalue, _ in raw_fields(inner, inner_base):
                        if dnum == DEFAULTS_TRACK_EVENT and dwire == 2:
                            check_unpacked(inner[dvalue[0]:dvalue[1]], inner_base + dvalue[0], DEFAULTS_UNPACKED,
                                           "TrackEventDefaults", where, errors)
    except RawError as e:
        errors.add("raw bytes", str(e))


def put_varint(out, value):
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def inflate_packets(data, errors):
    """The trace with each compressed packet replaced by the packets it holds,
    and how many compressed packets there were."""
    buf = memoryview(data)
    out = bytearray()
    compressed = 0
    try:
        for index, (number, wire, value, at) in enumerate(raw_fields(buf, 0)):
            if number != TRACE_PACKET or wire != 2:
                continue  # check_raw names it
            start, end = value
            packet = buf[start:end]
            fields = list(raw_fields(packet, start))
            blobs = [f for f in fields if f[0] == PACKET_COMPRESSED]
            if not blobs:
                out.append(buf[at])
                put_varint(out, end - start)
                out += packet
                continue
            compressed += 1
            where = f"packet {index} (byte {at})"
            others = sorted({f[0] for f in fields if f[0] != PACKET_COMPRESSED})
            if others or len(blobs) > 1 or blobs[0][1] != 2:
                errors.add(where, f"holds compressed_packets along with field(s) {others or [PACKET_COMPRESSED]}: "
                                  "the trace processor reads only the compressed packets")
                continue
            (bstart, bend) = blobs[0][2]
            try:
                inner = zlib.decompress(bytes(packet[bstart:bend]))
            except zlib.error as e:
                errors.add(where, f"compressed_packets do not inflate as a zlib stream: {e}")
                continue
            try:
                for inum, iwire, ivalue, iat in raw_fields(memoryview(inner), 0):
                    if inum != TRACE_PACKET or iwire != 2:
                        errors.add(where, f"inflates to field {inum} (wire type {iwire}) at byte {iat}, "
                                          "not a Trace.packet entry")
                    elif any(f[0] == PACKET_COMPRESSED
                             for f in raw_fields(memoryview(inner)[ivalue[0]:ivalue[1]], 0)):
                        errors.add(where, "holds a compressed packet inside a compressed packet")
            except RawError as e:
                errors.add(where, f"inflates to bytes that are not packets: {e}")
                continue
            out += inner
    except RawError:
        return data, compressed  # check_raw reports it
    return bytes(out), compressed


# --- the decoded walk ----------------------------------------------------------------------


def unknown_field_paths(message, path):
    """Paths of the messages in `message` (itself included) that hold unknown fields."""
    found = []
    unknown = unknown_fields.UnknownFieldSet(message)
    if len(unknown):
        numbers = sorted({f.field_number for f in unknown})
        found.append(f"{path} (field {', '.join(map(str, numbers))})")
    for field, value in message.ListFields():
        if field.type not in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
            continue
        if field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.type == FieldDescriptor.TYPE_MESSAGE:
                for key, item in value.items():
                    found += unknown_field_paths(item, f"{path}.{field.name}[{key!r}]")
        elif field.is_repeated:
            for i, item in enumerate(value):
                found += unknown_field_paths(item, f"{path}.{field.name}[{i}]")
        else:
            found += unknown_field_paths(value, f"{path}.{field.name}")
    return found


class SequenceClock:
    """A sequence-scoped clock as its last snapshot defined it."""

    def __init__(self, value, mono, incremental, unit):
        self.snapshot_value = value
        self.current = value
        self.mono = mono
        self.incremental = incremental
        self.unit = unit or 1

    def to_monotonic(self, timestamp):
        if self.incremental:
            self.current += timestamp
            value = self.current
        else:
            value = timestamp
        return self.mono + (value - self.snapshot_value) * self.unit


class Sequence:
    def __init__(self, sid):
        self.sid = sid
        self.cleared_at = None
        self.defaults = None
        self.interned = {}
        self.clocks = {}

    def clear(self, index):
        self.cleared_at = index
        self.defaults = None
        self.interned = {"event_names": {}, "event_categories": {}, "debug_annotation_names": {}}
        self.clocks = {}


# Where a slice's thread-time counter value waits, among its args, for the dump.
THREAD_TIME_ARG = "\0thread_time_ns"

class Track:
    def __init__(self, uuid, descriptor, index):
        self.uuid = uuid
        self.declared_at = index
        self.name = descriptor.name if descriptor.HasField("name") else None
        self.parent = descriptor.parent_uuid if descriptor.HasField("parent_uuid") else None
        self.pid = None
        self.tid = None
        self.thread_name = None
        self.counter_unit = None
        self.thread_time = False
        if descriptor.HasField("counter"):
            counter = descriptor.counter
            self.counter_unit = pb.CounterDescriptor.Unit.Name(counter.unit)
            if counter.unit == 0 and counter.HasField("unit_name"):
                self.counter_unit = counter.unit_name
            self.thread_time = counter.type == pb.CounterDescriptor.COUNTER_THREAD_TIME_NS
        if descriptor.HasField("thread"):
            self.pid = descriptor.thread.pid
            self.tid = descriptor.thread.tid
            self.thread_name = descriptor.thread.thread_name
        elif descriptor.HasField("process"):
            self.pid = descriptor.process.pid
            if self.name is None and descriptor.process.HasField("process_name"):
                self.name = descriptor.process.process_name
        self.events = []


def annotation_value(a):
    for name in ("bool_value", "uint_value", "int_value", "double_value", "string_value", "pointer_value",
                 "legacy_json_value"):
        if a.HasField(name):
            return getattr(a, name)
    return None


def check_trace(data, errors):
    """Runs every check on one input; returns its tracks for the dump."""
    check_raw(data, errors)
    try:
        trace = pb.Trace.FromString(data)
    except DecodeError as e:
        errors.add("decode", f"not a perfetto.protos.Trace: {e}")
        return {}
    if not trace.packet:
        errors.add("decode", "the trace holds no packet")
        return {}
    for where in unknown_field_paths(trace, "Trace")[:MAX_ERRORS_SHOWN]:
        errors.add("schema", f"unknown field in {where}")

    sequences = {}
    tracks = {}
    boot_minus_mono = None
    # Machine-wide clocks: the latest value any snapshot gave, and where.
    machine_clocks = {}

    for index, packet in enumerate(trace.packet):
        where = f"packet {index}"
        if not packet.HasField("trusted_packet_sequence_id") or packet.trusted_packet_sequence_id == 0:
            errors.add(where, "has no trusted_packet_sequence_id")
            continue
        sid = packet.trusted_packet_sequence_id
        where = f"packet {index} (sequence {sid})"
        seq = sequences.setdefault(sid, Sequence(sid))
        flags = packet.sequence_flags

        if flags & SEQ_CLEARED or packet.incremental_state_cleared:
            if seq.cleared_at is not None:
                errors.add(where, f"clears the sequence a second time (first at packet {seq.cleared_at}): "
                                  "do two files share a sequence id?")
            seq.clear(index)
        elif seq.cleared_at is None:
            errors.add(where, "comes before any packet that clears its sequence's incremental state")
            seq.clear(index)

        if packet.HasField("trace_packet_defaults"):
            seq.defaults = packet.trace_packet_defaults

        if packet.HasField("interned_data"):
            for kind, table in seq.interned.items():
                for entry in getattr(packet.interned_data, kind):
                    if entry.iid == 0:
                        errors.add(where, f"interns {kind} entry {entry.name!r} with iid 0")
                    elif table.get(entry.iid, entry.name) != entry.name:
                        errors.add(where, f"interns {kind} iid {entry.iid} as {entry.name!r}, "
                                          f"already {table[entry.iid]!r}")
                    table[entry.iid] = entry.name

        if packet.HasField("clock_snapshot"):
            readings = {c.clock_id: c for c in packet.clock_snapshot.clocks}
            mono = readings.get(CLOCK_MONOTONIC)
            boot = readings.get(CLOCK_BOOTTIME)
            if mono is not None and boot is not None:
                boot_minus_mono = boot.timestamp - mono.timestamp
            for clock_id, c in readings.items():
                if clock_id in SEQUENCE_CLOCKS:
                    continue
                last = machine_clocks.get(clock_id)
                if last is not None and c.timestamp < last[0]:
                    errors.add(where, f"snapshots machine-wide clock {clock_id} at {c.timestamp}, before "
                                      f"{last[0]} in the snapshot of packet {last[1]}: the trace processor "
                                      "refuses it (invalid_clock_snapshots)")
                else:
                    machine_clocks[clock_id] = (c.timestamp, index)
            for clock_id, c in readings.items():
                if clock_id not in SEQUENCE_CLOCKS:
                    continue
                if mono is None:
                    errors.add(where, f"snapshots sequence clock {clock_id} without CLOCK_MONOTONIC "
                                      "to convert it to")
                    continue
                seq.clocks[clock_id] = SequenceClock(c.timestamp, mono.timestamp, c.is_incremental,
                                                     c.unit_multiplier_ns)
            if packet.HasField("track_event") or packet.HasField("track_descriptor"):
                errors.add(where, "carries a clock snapshot and data: the trace processor reads only the snapshot")

        uses_incremental = False
        ts = None
        if packet.HasField("timestamp"):
            if packet.HasField("timestamp_clock_id"):
                clock = packet.timestamp_clock_id
            elif seq.defaults is not None and seq.defaults.HasField("timestamp_clock_id"):
                clock = seq.defaults.timestamp_clock_id
            else:
                clock = CLOCK_BOOTTIME
            if clock in SEQUENCE_CLOCKS:
                uses_incremental = True
                sc = seq.clocks.get(clock)
                if sc is None:
                    errors.add(where, f"stamps with sequence clock {clock}, which no snapshot on this "
                                      "sequence defines")
                else:
                    ts = sc.to_monotonic(packet.timestamp)
            elif clock == CLOCK_MONOTONIC:
                ts = packet.timestamp
            elif clock == CLOCK_BOOTTIME:
                if boot_minus_mono is None:
                    errors.add(where, "stamps with BOOTTIME, which no snapshot so far relates to MONOTONIC")
                else:
                    ts = packet.timestamp - boot_minus_mono
            else:
                errors.add(where, f"stamps with clock {clock}, which this checker cannot convert")

        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            if not d.HasField("uuid") or d.uuid == 0:
                errors.add(where, "declares a track without a uuid")
            elif d.uuid in tracks:
                errors.add(where, f"declares track {d.uuid} again (first at packet {tracks[d.uuid].declared_at})")
            else:
                if d.HasField("thread") and not (d.thread.HasField("pid") and d.thread.HasField("tid")):
                    errors.add(where, f"thread track {d.uuid} lacks its pid or tid")
                if d.HasField("process") and not d.process.HasField("pid"):
                    errors.add(where, f"process track {d.uuid} lacks its pid")
                tracks[d.uuid] = Track(d.uuid, d, index)

        if packet.HasField("track_event"):
            e = packet.track_event
            uses_iids = False
            name = None
            if e.HasField("name_iid"):
                uses_iids = True
                name = seq.interned["event_names"].get(e.name_iid)
                if name is None:
                    errors.add(where, f"event name iid {e.name_iid} is not interned on this sequence")
            elif e.HasField("name"):
                name = e.name
            categories = []
            for iid in e.category_iids:
                uses_iids = True
                category = seq.interned["event_categories"].get(iid)
                if category is None:
                    errors.add(where, f"category iid {iid} is not interned on this sequence")
                categories.append(category)
            categories += list(e.categories)
            args = {}
            pending = [(a, "") for a in e.debug_annotations]
            while pending:
                a, prefix = pending.pop(0)
                if a.HasField("name_iid"):
                    uses_iids = True
                    key = seq.interned["debug_annotation_names"].get(a.name_iid)
                    if key is None:
                        errors.add(where, f"debug annotation name iid {a.name_iid} is not interned "
                                          "on this sequence")
                        key = f"<iid {a.name_iid}>"
                else:
                    key = a.name
                pending += [(d, f"{prefix}{key}.") for d in a.dict_entries]
                pending += [(v, f"{prefix}{key}.") for v in a.array_values]
                args[prefix + key] = annotation_value(a)
            # Flows are given in the dump as if they were annotations.
            if e.flow_ids:
                args["flow_ids"] = list(e.flow_ids)
            if e.terminating_flow_ids:
                args["terminating_flow_ids"] = list(e.terminating_flow_ids)
            if (uses_iids or uses_incremental) and not flags & SEQ_NEEDS:
                errors.add(where, "uses interned data or an incremental clock without "
                                  "SEQ_NEEDS_INCREMENTAL_STATE in its sequence_flags")
            if e.HasField("track_uuid"):
                track = e.track_uuid
            elif (seq.defaults is not None and seq.defaults.HasField("track_event_defaults")
                  and seq.defaults.track_event_defaults.HasField("track_uuid")):
                track = seq.defaults.track_event_defaults.track_uuid
            else:
                track = None
                errors.add(where, "has a track event on no track (no track_uuid, no default)")
            if track is not None and track not in tracks:
                errors.add(where, f"has an event on track {track}, not declared before it")
                track = None
            on_counter = track is not None and tracks[track].counter_unit is not None
            if e.type not in (TYPE_BEGIN, TYPE_END, TYPE_INSTANT, TYPE_COUNTER):
                errors.add(where, f"has a track event of type {e.type}, expected a slice begin, end, "
                                  "instant or counter")
            elif e.type in (TYPE_BEGIN, TYPE_INSTANT) and name is None:
                errors.add(where, "begins a slice or instant without a name")
            elif e.type == TYPE_COUNTER:
                if track is not None and not on_counter:
                    errors.add(where, f"has a counter value on track {track}, which is not a counter track")
                if not (e.HasField("counter_value") or e.HasField("double_counter_value")):
                    errors.add(where, "has a counter event without a value")
                elif tracks.get(track) is not None and tracks[track].counter_unit == "UNIT_UNSPECIFIED":
                    errors.add(where, f"has a counter value on track {track}, whose unit is not given")
                args = {"value": e.counter_value if e.HasField("counter_value") else e.double_counter_value}
            elif on_counter:
                errors.add(where, f"has a slice or instant on counter track {track}")
            if not packet.HasField("timestamp"):
                errors.add(where, "has a track event without a timestamp")
            if len(e.extra_counter_track_uuids) != len(e.extra_counter_values):
                errors.add(where, f"has {len(e.extra_counter_track_uuids)} extra_counter_track_uuids and "
                                  f"{len(e.extra_counter_values)} extra_counter_values")
            for uuid, value in zip(e.extra_counter_track_uuids, e.extra_counter_values):
                counter = tracks.get(uuid)
                if counter is None or counter.counter_unit is None:
                    errors.add(where, f"samples extra counter track {uuid}, which is not a counter track "
                                      "declared before it")
                    continue
                if ts is not None:
                    counter.events.append((ts, index, TYPE_COUNTER, None, [], {"value": value}))
                if counter.thread_time:
                    args = dict(args, **{THREAD_TIME_ARG: value})
            if track is not None and ts is not None:
                tracks[track].events.append((ts, index, e.type, name, categories, args))

    for track in tracks.values():
        if track.parent is not None and track.parent not in tracks:
            errors.add(f"packet {track.declared_at}", f"track {track.uuid} has parent {track.parent}, "
                                                      "which is never declared")
        elif track.thread_time and (track.parent is None or tracks[track.parent].tid is None):
            errors.add(f"packet {track.declared_at}", f"thread-time counter track {track.uuid} is not "
                                                      "the child of a thread track")
        if track.thread_time and track.name is not None:
            # Perfetto's importer fills a slice's thread_ts/thread_dur only from
            # the built-in thread-time counter it names itself: a name of our
            # own turns it into an ordinary counter track.
            errors.add(f"packet {track.declared_at}", f"thread-time counter track {track.uuid} is named "
                                                      f"{track.name!r}: no slice would get a thread duration")
    return tracks


def slices(tracks, errors):
    """Pairs each track's begins and ends; returns the dump's records."""
    out = []
    for track in tracks.values():
        if track.counter_unit is not None:
            parent = tracks.get(track.parent)
            for ts, _, _, _, _, args in sorted(track.events, key=lambda e: (e[0], e[1])):
                name = track.name if track.name is not None or not track.thread_time else "thread_time"
                out.append({"kind": "counter", "pid": parent.pid if parent else None, "track": name,
                            "unit": track.counter_unit, "ts_ns": ts, "value": args["value"]})
            continue
        parent = tracks.get(track.parent)
        # An external lane is a process of its own above the kernel's pids,
        # each sub-lane a thread of it.
        lane = parent if (track.tid is not None and parent is not None and parent.tid is None
                          and parent.pid is not None and parent.pid >= 1 << 22) else None
        if lane is not None:
            base = {"lane": lane.name}
        elif track.tid is not None:
            base = {"pid": track.pid, "tid": track.tid, "thread": track.thread_name}
        elif track.pid is not None:
            base = {"pid": track.pid, "process": track.name}
        elif parent is not None and parent.pid is not None and parent.tid is None:
            # A track of its own under a process's track: a span that ran in pieces.
            base = {"pid": parent.pid, "async": track.uuid}
        else:
            parent = tracks.get(track.parent)
            base = {"lane": parent.name if parent else track.name}
        base["track"] = track.name if track.name is not None else track.thread_name
        stack = []
        # The trace processor sorts by timestamp; ties keep the file's order.
        for ts, index, kind, name, categories, args in sorted(track.events, key=lambda e: (e[0], e[1])):
            if kind == TYPE_BEGIN:
                stack.append((ts, index, name, categories, dict(args)))
            elif kind == TYPE_END:
                if not stack:
                    errors.add(f"packet {index}", f"ends a slice on track {track.uuid} at {ts} ns, "
                                                  "where none is open")
                    continue
                begin, _, bname, bcategories, bargs = stack.pop()
                thread_begin = bargs.pop(THREAD_TIME_ARG, None)
                thread_end = args.get(THREAD_TIME_ARG)
                bargs.update(args)
                bargs.pop(THREAD_TIME_ARG, None)
                record = dict(base, kind="slice", name=bname, category=",".join(c or "" for c in bcategories),
                              begin_ns=begin, end_ns=ts, args=bargs)
                if thread_begin is not None and thread_end is not None:
                    record.update(thread_ts_ns=thread_begin, thread_dur_ns=thread_end - thread_begin)
                out.append(record)
            else:
                out.append(dict(base, kind="instant", name=name, category=",".join(c or "" for c in categories),
                                begin_ns=ts, end_ns=ts, args=args))
        for begin, index, name, _, _ in stack:
            errors.add(f"packet {index}", f"slice {name!r} begun at {begin} ns on track {track.uuid} "
                                          "is never ended")
    return out


def flows(tracks, errors):
    """Checks that every terminating flow id was begun, no later, and ends once."""
    begun = {}
    ended = {}
    for track in tracks.values():
        for ts, index, _, _, _, args in track.events:
            for flow in args.get("flow_ids", []):
                begun[flow] = min(begun.get(flow, ts), ts)
            for flow in args.get("terminating_flow_ids", []):
                if flow in ended:
                    errors.add(f"packet {index}", f"ends flow {flow} again (first at packet {ended[flow]})")
                ended[flow] = index
    for track in tracks.values():
        for ts, index, _, _, _, args in track.events:
            for flow in args.get("terminating_flow_ids", []):
                if flow not in begun:
                    errors.add(f"packet {index}", f"ends flow {flow}, which no event begins")
                elif begun[flow] > ts:
                    errors.add(f"packet {index}", f"ends flow {flow} at {ts} ns, before it begins "
                                                  f"({begun[flow]} ns)")


def check(label, data):
    """Runs every check on one input; returns its errors, its dump records,
    its tracks, the inflated trace and how many compressed packets it held."""
    errors = Errors(label)
    inflated, compressed = inflate_packets(data, errors)
    tracks = check_trace(inflated, errors)
    records = slices(tracks, errors)
    flows(tracks, errors)
    return errors, records, tracks, inflated, compressed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", metavar="FILE")
    parser.add_argument("--concat", action="store_true",
                        help="also check the files concatenated, in the order given")
    parser.add_argument("--dump-slices", action="store_true",
                        help="print each slice and instant as a JSON line on stdout")
    parser.add_argument("--inflate", metavar="OUT",
                        help="write the trace with its compressed packets inflated to OUT")
    args = parser.parse_args()
    if args.inflate and len(args.files) > 1 and not args.concat:
        print("pftrace_check: --inflate takes one FILE, or several with --concat", file=sys.stderr)
        return 2

    blobs = []
    for path in args.files:
        try:
            with open(path, "rb") as f:
                blobs.append((path, f.read()))
        except OSError as e:
            print(f"pftrace_check: cannot read {path}: {e}", file=sys.stderr)
            return 2

    # (label, bytes, whether its slices are dumped)
    inputs = [(path, data, not args.concat) for path, data in blobs]
    if args.concat:
        inputs.append((f"concatenation of {len(blobs)} files", b"".join(data for _, data in blobs), True))

    failed = False
    dumped = []
    for label, data, dump in inputs:
        errors, records, tracks, inflated, compressed = check(label, data)
        if errors.items:
            failed = True
            errors.report()
        else:
            count = sum(1 for r in records if r["kind"] == "slice")
            packed = (f", {compressed} compressed packets inflating to {len(inflated)} bytes"
                      if compressed else "")
            print(f"{label}: ok ({len(data)} bytes{packed}, {len(tracks)} tracks, {count} slices)", file=sys.stderr)
        if dump:
            dumped += records
            if args.inflate:
                try:
                    with open(args.inflate, "wb") as f:
                        f.write(inflated)
                except OSError as e:
                    print(f"pftrace_check: cannot write {args.inflate}: {e}", file=sys.stderr)
                    return 2
    if args.dump_slices:
        for record in dumped:
            print(json.dumps(record, sort_keys=True))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
