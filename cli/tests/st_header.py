"""A safetensors file's JSON header apart from its buffer, for the CLI tests that edit golden and
outputs files independently of the C++ readers (malformed_inputs.cmake, scale_outputs.cmake)."""
import json
import struct


def read_st(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def write_st(path, header, buffer):
    text = json.dumps(header, separators=(',', ':'))
    text += ' ' * ((8 - len(text) % 8) % 8)
    open(path, 'wb').write(struct.pack('<Q', len(text)) + text.encode() + buffer)
