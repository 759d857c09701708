# weft — see README.md. Targets:
#   make run         weft's main job: AllReduce benchmark, 4 ranks (GPUs if present, else hal/host)
#   make test        vet and every test (CPU-only machines run hal/host; GPU tests skip with a reason)
#   make build       the weft CLI and libweft_nccl.so into bin/
#   make nccl        libweft_nccl.so (weft's NCCL 2.28 C ABI) into bin/; see docs/nccl.md
#   make gpu-bundle  CLI + GPU test binaries + runner script into .gpu/ (ignored by git)
GO ?= go
NPROC ?= 4
BENCH_ARGS ?= -b 8 -e 64M -f 4

.PHONY: build test hip-clang run gpu-bundle gpu-bundle-tune gpu-bundle-port gpu-bundle-net gpu-bundle-harden gpu-bundle-pkgs gpu-bundle-switch nocgo fuzz-smoke nccl

build: nccl
	$(GO) build ./...
	$(GO) build -o bin/weft ./cmd/weft

nccl:
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -o bin/libweft_nccl.so ./nccl

nocgo:
	CGO_ENABLED=0 $(GO) build ./...

# hal/xgmi's tests compile every plan kernel for AMD GPUs with a clang that
# has the AMDGPU target; hip-clang installs one when missing (Debian's
# clang-19), and WEFT_HIP_CLANG makes those tests fail rather than skip.
hip-clang:
	@scripts/install-hip-clang.sh >/dev/null

test: nocgo hip-clang
	$(GO) vet ./...
	clang=$$(scripts/install-hip-clang.sh) && WEFT_HIP_CLANG=$$clang $(GO) test -count=1 -timeout 30m ./...

run: build
	./bin/weft bench allreduce --nproc $(NPROC) $(BENCH_ARGS)

# Binaries for a GPU host (no Go toolchain there). Run with:
#   .gpu/gpu-check.sh   (WEFT_REQUIRE=nvlink is set inside)
GPU_PKGS = ./hal/nvlink ./hal/nvswitch ./hal/pcie ./internal/cudadev ./internal/cuda ./internal/nccl ./conformance .
# Stripped (-s -w). The device tool carries at most 64 MiB, and the whole
# bundle is about 73 MiB, so each issue's script has a bundle of what it runs:
#   make gpu-bundle-tune   scripts/gpu-tune.sh  (weft, weft.test)
#   make gpu-bundle-port   scripts/gpu-port.sh  (weft, moe, weft.test, nvlink/pcie/cudadev tests)
#   make gpu-bundle-net    scripts/gpu-net.sh   (weft)
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

gpu-bundle-pkgs:
	rm -rf .gpu && mkdir -p .gpu
	CGO_ENABLED=1 $(GO) build -ldflags='-s -w' -o .gpu/weft ./cmd/weft
	case " $(EXTRA) " in *" nccl "*) CGO_ENABLED=1 $(GO) build -ldflags='-s -w' -buildmode=c-shared -o .gpu/libweft_nccl.so ./nccl;; esac
	case " $(EXTRA) " in *" moe "*) CGO_ENABLED=1 $(GO) build -ldflags='-s -w' -o .gpu/moe ./examples/moe;; esac
	for p in $(PKGS); do \
	  name=$$(echo $$p | sed 's#^\./##; s#/#_#g; s#^\.$$#weft#'); \
	  CGO_ENABLED=1 $(GO) test -c -ldflags='-s -w' -o .gpu/$$name.test $$p || exit 1; \
	done
	cp scripts/gpu-check.sh scripts/gpu-dropin.sh scripts/gpu-port.sh scripts/gpu-net.sh scripts/gpu-tune.sh scripts/gpu-harden.sh scripts/steps.sh .gpu/
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
