# weft — see README.md. Targets:
#   make run         weft's main job: AllReduce benchmark, 4 ranks (GPUs if present, else hal/host)
#   make test        every test (CPU-only machines run hal/host; GPU tests skip with a reason)
#   make check       go vet, with and without cgo (CI runs it after make test)
#   make build       the weft CLI and libweft_nccl.so into bin/
#   make nccl        libweft_nccl.so (weft's NCCL 2.28 C ABI) into bin/; see docs/nccl.md
#   make gpu-bundle  CLI + GPU test binaries + runner script into .gpu/ (ignored by git)
#   make fuzz-smoke  every fuzz target of the module for FUZZTIME (3s) each
GO ?= go
NPROC ?= 4
BENCH_ARGS ?= -b 8 -e 64M -f 4
FUZZTIME ?= 3s

.PHONY: build test check hip-clang run gpu-bundle gpu-bundle-accept gpu-bundle-four gpu-bundle-tune gpu-bundle-port gpu-bundle-net gpu-bundle-harden gpu-bundle-final gpu-bundle-pkgs gpu-bundle-switch nocgo fuzz-smoke nccl

build: nccl
	@echo "make: building every package and bin/weft"
	@$(GO) build ./...
	@$(GO) build -o bin/weft ./cmd/weft

nccl:
	@echo "make: building bin/libweft_nccl.so (the NCCL C ABI)"
	@CGO_ENABLED=1 $(GO) build -buildmode=c-shared -o bin/libweft_nccl.so ./nccl

nocgo:
	@echo "make: checking that every package builds without cgo"
	@CGO_ENABLED=0 $(GO) build ./...

# hal/xgmi's tests compile every plan kernel for AMD GPUs with a clang that
# has the AMDGPU target; hip-clang installs one when missing (Debian's
# clang-19), and WEFT_HIP_CLANG makes those tests fail rather than skip.
hip-clang:
	@echo "make: finding a clang with the AMDGPU target for hal/xgmi's tests (installs clang-19 when missing)"
	@scripts/install-hip-clang.sh >/dev/null

# make test: every test, with go test's own vet checks on every package it
# tests. The full go vet and the build without cgo (which type-checks the
# bindings' !cgo stubs against everything that uses them) are `make check`,
# which CI runs after make test: two more compiles of the whole module,
# kept out of the edit-test loop.
# GOGC=400: the compiler and the test processes (hal/host moves every
# byte through Go memory) collect garbage a quarter as often, about 8% less
# CPU on a 2-core machine, for memory these machines have.
test: hip-clang
	@echo "make: go test ./... (hal/host on CPU-only machines; GPU tests skip with a reason)"
	@export GOGC=$${GOGC:-400}; clang=$$(scripts/install-hip-clang.sh) && WEFT_HIP_CLANG=$$clang $(GO) test -count=1 -timeout 30m ./...

check:
	@echo "make: go vet ./... and CGO_ENABLED=0 go vet ./... (the build without cgo)"
	@export GOGC=$${GOGC:-400}; $(GO) vet ./... && CGO_ENABLED=0 $(GO) vet ./...

run: build
	@echo "make: weft bench allreduce --nproc $(NPROC) $(BENCH_ARGS)"
	@./bin/weft bench allreduce --nproc $(NPROC) $(BENCH_ARGS)

# Every fuzz target of the module for FUZZTIME each: the targets of each
# package are listed by go test -list, then fuzzed one at a time (go test
# fuzzes one target per run). Fails on the first crasher, which go test
# writes under the package's testdata/fuzz.
fuzz-smoke:
	@$(GO) list -f '{{.ImportPath}} {{.Dir}}' ./... | while read pkg dir; do \
	  grep -qs '^func Fuzz' $$dir/*_test.go || continue; \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "make: fuzz $$pkg $$f for $(FUZZTIME)"; \
	    log=$$(mktemp); \
	    $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg >$$log 2>&1 || { cat $$log; rm -f $$log; exit 1; }; \
	    rm -f $$log; \
	  done; \
	done
	@echo "make: fuzz-smoke: every fuzz target ran $(FUZZTIME) without a crasher"

# Binaries for a GPU host (no Go toolchain there). Run with:
#   .gpu/gpu-check.sh   (WEFT_REQUIRE=nvlink is set inside)
GPU_PKGS = ./hal/nvlink ./hal/nvswitch ./hal/pcie ./internal/cudadev ./internal/cuda ./internal/sysnccl ./conformance .
# Stripped (-s -w). The device tool carries at most 64 MiB, and the whole
# bundle is about 73 MiB, so each issue's script has a bundle of what it runs:
#   make gpu-bundle-tune   scripts/gpu-tune.sh  (weft, weft.test)
#   make gpu-bundle-port   scripts/gpu-port.sh  (weft, moe, weft.test, nvlink/pcie/cudadev tests)
#   make gpu-bundle-net    scripts/gpu-net.sh   (weft); scripts/gpu-nodes.sh (emulated nodes of several GPUs, NCCL beside) with any bundle
#   make gpu-bundle-harden scripts/gpu-harden.sh (weft, libweft_nccl.so, weft/nvlink/cudadev tests)
gpu-bundle:
	$(MAKE) gpu-bundle-pkgs PKGS="$(GPU_PKGS)" EXTRA="nccl moe"

gpu-bundle-tune:
	$(MAKE) gpu-bundle-pkgs PKGS="." EXTRA=""
gpu-bundle-port:
	$(MAKE) gpu-bundle-pkgs PKGS=". ./hal/nvlink ./hal/pcie ./internal/cudadev" EXTRA="moe"
gpu-bundle-net:
	$(MAKE) gpu-bundle-pkgs PKGS="" EXTRA=""
# scripts/gpu-harden.sh (issue 18): the drop-in library, the root package's and the close tests.
gpu-bundle-harden:
	$(MAKE) gpu-bundle-pkgs PKGS=". ./hal/nvlink ./internal/cudadev" EXTRA="nccl"
# scripts/gpu-final.sh (issues 18-20): the same and hal/nvswitch's compile-only tests.
gpu-bundle-final:
	$(MAKE) gpu-bundle-pkgs PKGS=". ./hal/nvlink ./hal/nvswitch ./internal/cudadev" EXTRA="nccl"

# scripts/gpu-accept.sh (issues 19-22): the same, and UCX's libraries from this machine for a
# GPU host without them (libucx0; hal/ucx dlopens libucp.so.0).
gpu-bundle-accept:
	$(MAKE) gpu-bundle-pkgs PKGS=". ./hal/nvlink ./hal/nvswitch ./internal/cudadev" EXTRA="nccl"
	mkdir -p .gpu/ucx/ucx
	for f in libucp.so.0 libucs.so.0 libuct.so.0 libucm.so.0 libnuma.so.1 ucx/libuct_cma.so.0; do \
	  cp -L /usr/lib/x86_64-linux-gnu/$$f .gpu/ucx/$$f || echo "make: $$f not found here (apt-get install libucx0): the GPU host's own UCX is needed"; \
	done
	go build -buildmode=c-shared -o .gpu/libgoempty.so ./examples/torch/goempty
	@du -sh .gpu
	mkdir -p .gpuz && tar -czf .gpuz/bundle.tgz .gpu && du -sh .gpuz/bundle.tgz
	@echo "make: carry .gpuz (the bundle compressed: with the working tree it must stay under the device tool's 64 MiB); there: tar -xzf .gpuz/bundle.tgz && bash .gpu/gpu-accept.sh"

# Three ranks and more on a 4-GPU host (scripts/gpu-four.sh): the NCCL library alone.
gpu-bundle-four:
	$(MAKE) gpu-bundle-pkgs PKGS="" EXTRA="nccl"
	mkdir -p .gpuz && tar -czf .gpuz/bundle.tgz .gpu && du -sh .gpuz/bundle.tgz
	@echo "make: carry .gpuz; there (nvidia-h100-x4): tar -xzf .gpuz/bundle.tgz && bash .gpu/gpu-four.sh"

gpu-bundle-pkgs:
	rm -rf .gpu && mkdir -p .gpu
	CGO_ENABLED=1 $(GO) build -ldflags='-s -w' -o .gpu/weft ./cmd/weft
	case " $(EXTRA) " in *" nccl "*) CGO_ENABLED=1 $(GO) build -ldflags='-s -w' -buildmode=c-shared -o .gpu/libweft_nccl.so ./nccl;; esac
	case " $(EXTRA) " in *" moe "*) CGO_ENABLED=1 $(GO) build -ldflags='-s -w' -o .gpu/moe ./examples/moe;; esac
	for p in $(PKGS); do \
	  name=$$(echo $$p | sed 's#^\./##; s#/#_#g; s#^\.$$#weft#'); \
	  CGO_ENABLED=1 $(GO) test -c -ldflags='-s -w' -o .gpu/$$name.test $$p || exit 1; \
	done
	cp scripts/gpu-check.sh scripts/gpu-dropin.sh scripts/gpu-port.sh scripts/gpu-net.sh scripts/gpu-tune.sh scripts/gpu-harden.sh scripts/gpu-final.sh scripts/gpu-tune-ring.sh scripts/gpu-accept.sh scripts/gpu-fsdp.sh scripts/gpu-four.sh scripts/gpu-nodes.sh scripts/steps.sh .gpu/
	@du -sh .gpu

# Issue 10's one-GPU check (scripts/gpu-switch.sh): stripped binaries, well inside the device
# tool's 64 MiB carry.
gpu-bundle-switch:
	rm -rf .gpu && mkdir -p .gpu
	CGO_ENABLED=1 $(GO) build -ldflags='-s -w' -o .gpu/weft ./cmd/weft
	for p in ./hal/nvswitch ./hal/nvlink ./internal/cudadev; do \
	  name=$$(echo $$p | sed 's#^\./##; s#/#_#g'); \
	  CGO_ENABLED=1 $(GO) test -c -ldflags='-s -w' -o .gpu/$$name.test $$p || exit 1; \
	done
	cp scripts/gpu-switch.sh scripts/steps.sh .gpu/
	@du -sh .gpu
