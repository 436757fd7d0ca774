"""A stand-in for an HDFS NameNode's WebHDFS REST API, over a temporary directory.

No NameNode can run in the test environment, so this small server answers the operations the
`hdfs` client library issues for our WebHdfsFileSystem adapter, with HDFS's semantics where
they matter to the commit protocol:

- GETFILESTATUS, LISTSTATUS, MKDIRS, DELETE (recursive or not), GETHOMEDIRECTORY;
- CREATE and OPEN in two steps: the "NameNode" answers 307 with a Location on the
  "DataNode" (the same server, ``datanode=true``), as a real cluster does; CREATE bodies may
  arrive chunked (the client streams them);
- RENAME answers ``{"boolean": false}`` instead of replacing an existing file, fails on a
  missing source or destination parent, and moves a source *into* an existing directory.

Errors are ``RemoteException`` JSON bodies with HDFS's exception names, which the client
turns into HdfsError. All namespace operations hold one lock, as the NameNode serialises them.
It is test code: one process, no permissions, no replication.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlparse

PREFIX = "/webhdfs/v1"


class _Error(Exception):
    def __init__(self, status: int, exception: str, message: str):
        super().__init__(message)
        self.status, self.exception, self.message = status, exception, message


def _file_status(p: Path, suffix: str) -> dict:
    st = p.stat()
    is_dir = p.is_dir()
    return {
        "pathSuffix": suffix,
        "type": "DIRECTORY" if is_dir else "FILE",
        "length": 0 if is_dir else st.st_size,
        "modificationTime": int(st.st_mtime * 1000),
        "accessTime": int(st.st_atime * 1000),
        "blockSize": 134217728,
        "replication": 0 if is_dir else 1,
        "owner": "test",
        "group": "test",
        "permission": "755",
    }


class _Handler(BaseHTTPRequestHandler):
    server: WebHdfsServer
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: an answer's headers and body go out in two writes; on a kept-alive
    # connection Nagle's algorithm holds the body until the client's delayed ACK (~40 ms
    # a request), as a real NameNode's server does not.
    disable_nagle_algorithm = True

    def log_message(self, *args) -> None:  # keep pytest output quiet
        pass

    def _dispatch(self, method: str) -> None:
        url = urlparse(self.path)
        params = {k.lower(): v[0] for k, v in parse_qs(url.query).items()}
        op = params.get("op", "").upper()
        hdfs_path = unquote(url.path[len(PREFIX) :]) or "/"
        try:
            if not url.path.startswith(PREFIX):
                raise _Error(404, "IllegalArgumentException", f"not a WebHDFS path: {url.path}")
            handler = getattr(self, f"op_{method}_{op}", None)
            if handler is None:
                raise _Error(400, "UnsupportedOperationException", f"{method} {op}")
            handler(hdfs_path, params)
        except _Error as e:
            self._json(
                e.status, {"RemoteException": {"exception": e.exception, "message": e.message}}
            )

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # responses

    def _json(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _redirect_to_datanode(self) -> None:
        host, port = self.server.server_address[:2]
        self.send_response(307)
        self.send_header("Location", f"http://{host}:{port}{self.path}&datanode=true")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    # the namespace

    def _local(self, hdfs_path: str) -> Path:
        parts = [p for p in hdfs_path.split("/") if p]
        if ".." in parts:
            raise _Error(400, "IllegalArgumentException", hdfs_path)
        return self.server.base.joinpath(*parts)

    def _existing(self, hdfs_path: str) -> Path:
        p = self._local(hdfs_path)
        if not p.exists():
            raise _Error(404, "FileNotFoundException", f"File does not exist: {hdfs_path}")
        return p

    def op_GET_GETFILESTATUS(self, path: str, params: dict) -> None:
        with self.server.lock:
            p = self._existing(path)
            self._json(200, {"FileStatus": _file_status(p, "")})

    def op_GET_LISTSTATUS(self, path: str, params: dict) -> None:
        with self.server.lock:
            p = self._existing(path)
            if p.is_dir():
                entries = [_file_status(c, c.name) for c in sorted(p.iterdir())]
            else:
                entries = [_file_status(p, "")]
            self._json(200, {"FileStatuses": {"FileStatus": entries}})

    def op_GET_GETHOMEDIRECTORY(self, path: str, params: dict) -> None:
        self._json(200, {"Path": "/user/test"})

    def op_PUT_MKDIRS(self, path: str, params: dict) -> None:
        with self.server.lock:
            p = self._local(path)
            if p.exists() and not p.is_dir():
                raise _Error(403, "FileAlreadyExistsException", f"{path} is a file")
            p.mkdir(parents=True, exist_ok=True)
        self._json(200, {"boolean": True})

    def op_PUT_CREATE(self, path: str, params: dict) -> None:
        if params.get("datanode") != "true":
            self._body()  # the client sends no data to the NameNode, but drain anyway
            self._redirect_to_datanode()
            return
        data = self._body()
        overwrite = params.get("overwrite", "false").lower() == "true"
        with self.server.lock:
            p = self._local(path)
            if p.is_dir():
                raise _Error(403, "FileAlreadyExistsException", f"{path} is a directory")
            if p.exists() and not overwrite:
                raise _Error(403, "FileAlreadyExistsException", f"{path} already exists")
            p.parent.mkdir(parents=True, exist_ok=True)  # HDFS CREATE makes parents
            p.write_bytes(data)
        self.send_response(201)
        self.send_header("Location", f"hdfs://stand-in{quote(path)}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def op_GET_OPEN(self, path: str, params: dict) -> None:
        if params.get("datanode") != "true":
            with self.server.lock:
                p = self._existing(path)
                if p.is_dir():
                    raise _Error(404, "FileNotFoundException", f"{path} is a directory")
            self._redirect_to_datanode()
            return
        with self.server.lock:
            data = self._existing(path).read_bytes()
        offset = int(params.get("offset") or 0)
        length = params.get("length")
        data = (
            data[offset : offset + int(length)] if length not in (None, "None") else data[offset:]
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def op_PUT_RENAME(self, path: str, params: dict) -> None:
        dst_path = params.get("destination")
        if not dst_path:
            raise _Error(400, "IllegalArgumentException", "destination missing")
        with self.server.lock:
            src, dst = self._local(path), self._local(dst_path)
            if dst.is_dir():  # HDFS moves the source into an existing directory
                dst = dst / src.name
            ok = src.exists() and dst.parent.is_dir() and not dst.exists() and src != dst
            if ok:
                os.rename(src, dst)
        self._json(200, {"boolean": ok})

    def op_DELETE_DELETE(self, path: str, params: dict) -> None:
        recursive = params.get("recursive", "false").lower() == "true"
        with self.server.lock:
            p = self._local(path)
            if not p.exists():
                self._json(200, {"boolean": False})
                return
            if p.is_dir():
                if any(p.iterdir()) and not recursive:
                    raise _Error(403, "PathIsNotEmptyDirectoryException", f"`{path} is non empty'")
                shutil.rmtree(p)
            else:
                p.unlink()
        self._json(200, {"boolean": True})


class WebHdfsServer(ThreadingHTTPServer):
    """Serve WebHDFS for the directory ``base`` on 127.0.0.1; ``url`` is the NameNode URL."""

    daemon_threads = True

    def __init__(self, base: Path):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.base = Path(base)
        self.base.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> WebHdfsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join()
