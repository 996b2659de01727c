#!/usr/bin/env bash
# Regenerates the Python client's protobuf and gRPC modules (clients/python/src/skillenv/_gen) from
# proto/ and the vendored google/api and google/rpc protos, offline: buf (from npm) drives Debian's
# protoc and grpc_python_plugin (clients/python/README.md). Run it as `npm run generate:python`,
# which puts buf on PATH.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=clients/python/src/skillenv/_gen
buf generate --template buf.gen.python.yaml
# protoc names modules by proto path ("from skillenv.sessions.v1 import common_pb2", "from google.api
# import annotations_pb2") and protoc 3.21 cannot root them elsewhere. Rooting them under
# skillenv._gen makes the generated tree an ordinary subpackage of the client: nothing is added to
# sys.path and no top-level google.api or google.rpc package is installed beside protobuf's own.
find "$out" -name '*.py' -o -name '*.pyi' | xargs sed -i -E \
  -e 's/^from (skillenv|google\.api|google\.rpc)([. ])/from skillenv._gen.\1\2/' \
  -e "s/(BuildTopDescriptorsAndMessages\(DESCRIPTOR, ')(skillenv|google\.api|google\.rpc)\./\1skillenv._gen.\2./"
