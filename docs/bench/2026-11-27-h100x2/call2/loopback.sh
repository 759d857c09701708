#!/usr/bin/env bash
# Call 2 (2026-11-27, 2×H100 host, CPU only): what one TCP hop on loopback costs on the GPU host.
# lb (a throwaway ping-pong of 160-byte messages between two goroutines locked to threads, the
# receiver polling): "net" net.Conn writes and reads, "netdl" the same with a deadline set before
# every write and read and the write as net.Buffers (hal/socket's pattern), "raw" the sockets
# detached from Go's netpoller (dup'd descriptors, non-blocking read/write syscalls); then
# hal/socket's BenchmarkSocketPingPong on the same host.
set -u
for i in 1 2 3; do for m in net netdl raw; do .gpuz/x/lb $m; done; done
gunzip -c .gpuz/x/socket.test.gz >/tmp/socket.test && chmod +x /tmp/socket.test
(cd hal/socket && /tmp/socket.test -test.run XXX -test.bench 'BenchmarkSocketPingPong' -test.benchtime 20000x)
nproc; cat /sys/fs/cgroup/cpu.max 2>/dev/null; uname -r
