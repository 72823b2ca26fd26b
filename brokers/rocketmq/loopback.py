"""Keeping every RocketMQ socket on 127.0.0.1.

The name server, broker and proxy remoting ports honour ``bindAddress``, but two listeners
are hard-wired to the wildcard address in RocketMQ 5: the master's HA port (slaves
replicate through it) and the proxy's gRPC port. Locally brokerbench therefore starts the
RocketMQ JVMs with a tiny ``LD_PRELOAD`` library that turns a bind to ``0.0.0.0`` (or
``::``) into a bind to the IPv4 loopback address. It is compiled once with the C compiler
into the artifact cache. AWS nodes do not use it: there the security group confines them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from brokers.errors import BrokerUnavailable
from brokers.jvm import cache_dir
from brokers.local import run_checked

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

/* bind() that moves wildcard binds to the loopback interface (brokerbench). */
int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real_bind;
    if (!real_bind) real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in in4;
        memcpy(&in4, addr, sizeof in4);
        if (in4.sin_addr.s_addr == htonl(INADDR_ANY)) {
            in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real_bind(fd, (const struct sockaddr *)&in4, sizeof in4);
        }
    } else if (addr && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 in6;
        memcpy(&in6, addr, sizeof in6);
        if (IN6_IS_ADDR_UNSPECIFIED(&in6.sin6_addr)) {
            /* ::ffff:127.0.0.1, the IPv4 loopback address on a dual-stack socket */
            static const unsigned char mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                                     0, 0, 0xff, 0xff, 127, 0, 0, 1};
            memcpy(&in6.sin6_addr, mapped, sizeof mapped);
            return real_bind(fd, (const struct sockaddr *)&in6, sizeof in6);
        }
    }
    return real_bind(fd, addr, len);
}
"""


def library() -> Path:
    return cache_dir("rocketmq", "loopback-bind") / "loopback_bind.so"


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def build() -> Path:
    """Compile the library once (later calls reuse it); needs a C compiler."""
    target = library()
    if target.exists():
        return target
    cc = compiler()
    if cc is None:
        raise BrokerUnavailable(
            "no C compiler for RocketMQ's loopback-bind library: install the Debian package gcc"
        )
    source = target.with_suffix(".c")
    source.write_text(SOURCE)
    partial = target.with_suffix(".so.partial")
    run_checked(
        [cc, "-shared", "-fPIC", "-O2", "-o", str(partial), str(source), "-ldl"],
        "compiling RocketMQ's loopback-bind library",
        timeout=120,
    )
    partial.rename(target)
    return target
