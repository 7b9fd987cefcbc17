# runner: a GitLab-compatible CI job runner agent.
#
#   make              build/runner
#   make test         every test: unit tests plain and under ASan+UBSan,
#                     then the integration tests; ends with "N passed, N failed"
#   make demo         the main job end to end against the bundled GitLab double
#                     (KEEP=1 keeps its work directory and says where)
#   make bench        benchmarks against the GitLab double (B=id for one;
#                     see BENCHMARKS.md); prints figures, never fails for slowness
#   make fuzz         the TOML parser under libFuzzer for FUZZ_SECONDS (60)
#   make deb          build/deb/runner_VERSION-1_ARCH.deb (DEB_VERSION= for another)
#   make image        the container image (runner:VERSION), built offline
#                     in a private dockerd from local Debian bases
#
# Targets that need Debian packages install the missing ones first
# (packaging/install-deps.sh).  Sources are found by folder; the folders are
# the architecture (see README.md and docs/design.md).

CC	?= cc
PYTHON	:= /usr/bin/python3
SHARED	?= $(abspath $(CURDIR)/../shared)
PKGS	:= libcurl libuv libcjson zlib libcrypto libarchive

VERSION		:= $(shell cat VERSION)
REVISION	:= $(shell git rev-parse --short=8 HEAD 2>/dev/null || echo unknown)

WARN	:= -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
	   -Wmissing-prototypes -Wvla -Wpointer-arith
CSTD	:= -std=c11 -D_GNU_SOURCE
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CFLAGS	?= -O2 -g
ALL_CFLAGS = $(CSTD) $(WARN) -I. $(PKG_CFLAGS) -MMD -MP $(CFLAGS)
SAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
	     -fno-omit-frame-pointer
LIBS	= $(PKG_LIBS) -lm

# B is free for `make bench B=<scenario>`, as the benchmarks issue asks.
BUILD	:= build
A	:= build/asan

# Everything but main.c goes into a library that the binary, the unit
# tests and the tools link against.
LIB_SRC		:= $(sort $(filter-out runner/main.c,$(wildcard lib/*.c api/*.c executors/*.c executors/docker/*.c helpers/*.c runner/*.c)))
UNIT_SRC	:= $(sort $(wildcard tests/unit/test_*.c))
TOOL_SRC	:= $(sort $(wildcard tests/tools/*.c))

LIB_OBJ		:= $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
LIB_OBJ_ASAN	:= $(LIB_SRC:%.c=$(A)/obj/%.o)
UNIT_BIN	:= $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
UNIT_BIN_ASAN	:= $(UNIT_SRC:tests/unit/%.c=$(A)/tests/%)
TOOL_BIN	:= $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tools/%)
TOOL_BIN_ASAN	:= $(TOOL_SRC:tests/tools/%.c=$(A)/tools/%)

.PHONY: all deps rootfs image deb test unit unit-asan tools demo bench fuzz clean format \
	check-layering FORCE

# Test and tool objects are intermediates of pattern rules; keep them so a
# second `make test` rebuilds nothing.
.SECONDARY: $(UNIT_SRC:%.c=$(BUILD)/obj/%.o) $(UNIT_SRC:%.c=$(A)/obj/%.o) \
	    $(TOOL_SRC:%.c=$(BUILD)/obj/%.o) $(TOOL_SRC:%.c=$(A)/obj/%.o)

all: $(BUILD)/runner

# Runs apt-get only when a package is missing; cheap otherwise.
deps:
	@packaging/install-deps.sh

$(BUILD)/obj/%.o: %.c | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(A)/obj/%.o: %.c | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) -c $< -o $@

# The revision changes with every commit; only lib/version.o sees it.
$(BUILD)/obj/lib/version.o $(A)/obj/lib/version.o: ALL_CFLAGS += \
	-DRUNNER_VERSION='"$(VERSION)"' -DRUNNER_REVISION='"$(REVISION)"'
$(BUILD)/obj/lib/version.o $(A)/obj/lib/version.o: $(BUILD)/REVISION
$(BUILD)/REVISION: FORCE
	@mkdir -p $(BUILD)
	@echo '$(VERSION) $(REVISION)' | cmp -s - $@ || echo '$(VERSION) $(REVISION)' > $@
FORCE:

# `runner install` writes the packaged unit: the file itself, made into a C
# string, so that the two cannot drift apart (runner/cmd_service.c).
$(BUILD)/gen/unit_template.inc: packaging/systemd/runner.service
	@mkdir -p $(dir $@)
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $< > $@.tmp
	mv $@.tmp $@
$(BUILD)/obj/runner/cmd_service.o $(A)/obj/runner/cmd_service.o: $(BUILD)/gen/unit_template.inc
$(BUILD)/obj/runner/cmd_service.o $(A)/obj/runner/cmd_service.o: ALL_CFLAGS += -I$(BUILD)/gen

$(BUILD)/.deps-ok: packaging/install-deps.sh
	@packaging/install-deps.sh
	@mkdir -p $(BUILD) && touch $@

$(BUILD)/librunner.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(A)/librunner.a: $(LIB_OBJ_ASAN)
	@mkdir -p $(A)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/runner: $(BUILD)/obj/runner/main.o $(BUILD)/librunner.a
	$(CC) $(CFLAGS) -o $@ $^ $(LIBS)

$(A)/runner: $(A)/obj/runner/main.o $(A)/librunner.a
	$(CC) $(SAN_FLAGS) -o $@ $^ $(LIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(BUILD)/librunner.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_LDFLAGS) -o $@ $^ -lcmocka $(LIBS)

$(A)/tests/%: $(A)/obj/tests/unit/%.o $(A)/librunner.a
	@mkdir -p $(dir $@)
	$(CC) $(SAN_FLAGS) $(TEST_LDFLAGS) -o $@ $^ -lcmocka $(LIBS)

# test_vars counts the library's reallocs (how lists grow) through a wrapper.
$(BUILD)/tests/test_vars $(A)/tests/test_vars: TEST_LDFLAGS = -Wl,--wrap=realloc
# test_log reads what --syslog sends through wrappers of syslog(3).
$(BUILD)/tests/test_log $(A)/tests/test_log: \
	TEST_LDFLAGS = -Wl,--wrap=openlog,--wrap=syslog,--wrap=closelog

$(BUILD)/tools/%: $(BUILD)/obj/tests/tools/%.o $(BUILD)/librunner.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LIBS)

$(A)/tools/%: $(A)/obj/tests/tools/%.o $(A)/librunner.a
	@mkdir -p $(dir $@)
	$(CC) $(SAN_FLAGS) -o $@ $^ $(LIBS)

unit: $(UNIT_BIN)
unit-asan: $(UNIT_BIN_ASAN)
tools: $(TOOL_BIN) $(TOOL_BIN_ASAN)

# Everything the test driver runs, then the driver.  RUNNER_SHARED_DIR
# tells the tests where ../shared (toml-test, config samples) is.
test: deps rootfs check-layering $(BUILD)/runner $(A)/runner unit unit-asan tools
	RUNNER_SHARED_DIR=$(SHARED) $(PYTHON) tests/run_tests.py

# Local Debian 12 trees (debootstrap): the bases of the container image and
# the fresh machine of the package tests.  Like deps, an install step (the
# only one that fetches, from Debian's mirror); cached by a stamp.
rootfs: deps
	@packaging/rootfs.sh runtime $(BUILD)/rootfs/runtime
	@packaging/rootfs.sh build $(BUILD)/rootfs/build

# The image, built offline from those trees in a private dockerd
# (build/docker/) that is stopped again; see packaging/container/.
image: rootfs
	packaging/container/build-image.sh --offline

# The folders are the layers (docs/design.md): lib/ includes only lib/;
# api/ includes lib/ and api/; executors/ includes lib/, executors/ and
# api/http.h; helpers/ includes lib/, api/ and helpers/; only runner/
# includes runner/.
check-layering:
	@bad=$$(grep -nE '#include "' lib/*.[ch] | grep -vE '#include "lib/'; \
	       grep -nE '#include "' api/*.[ch] | grep -vE '#include "(lib|api)/'; \
	       grep -nE '#include "' executors/*.[ch] executors/docker/*.[ch] | grep -vE '#include "(lib/|executors/|api/http\.h)'; \
	       grep -nE '#include "' helpers/*.[ch] | grep -vE '#include "(lib|api|helpers)/'); \
	if [ -n "$$bad" ]; then echo "layering violation:"; echo "$$bad"; exit 1; fi

# The Debian package, built by dpkg-buildpackage in a staged copy of the
# tracked files (packaging/debian/make-deb.sh).  DEB_VERSION and DEB_DIR
# let the tests build a second, higher version elsewhere.
DEB_VERSION	?= $(VERSION)-1
DEB_DIR		?= $(BUILD)/deb
deb: $(BUILD)/.deps-ok
	@packaging/debian/make-deb.sh '$(DEB_VERSION)' '$(DEB_DIR)'

demo: deps $(BUILD)/runner
	$(PYTHON) tests/demo.py

# Not part of `test`: benchmarks measure, they assert nothing.
bench: deps $(BUILD)/runner tools
	$(PYTHON) tests/bench/run.py $(B)

FUZZ_SECONDS ?= 60
FUZZ_SRC := runner/toml.c runner/toml_write.c lib/buf.c lib/xmalloc.c
fuzz: deps
	@mkdir -p $(BUILD)/fuzz/corpus
	clang $(CSTD) $(WARN) -I. -g -O1 -fsanitize=fuzzer,address,undefined \
	    -o $(BUILD)/fuzz/fuzz_toml tests/fuzz/fuzz_toml.c $(FUZZ_SRC) -lm
	@if [ -d $(SHARED)/toml-test ]; then \
	    find $(SHARED)/toml-test $(SHARED)/config-samples -name '*.toml' \
	        -exec cp {} $(BUILD)/fuzz/corpus/ \; ; fi
	$(BUILD)/fuzz/fuzz_toml -max_total_time=$(FUZZ_SECONDS) -max_len=8192 \
	    -timeout=5 -print_final_stats=1 $(BUILD)/fuzz/corpus

format:
	clang-format -i runner/*.[ch] api/*.[ch] executors/*.[ch] executors/docker/*.[ch] tests/unit/*.c tests/tools/*.c 2>/dev/null || true

clean:
	rm -rf $(BUILD)

# Only the compilers' dependency files: build/ also holds root file systems
# (build/rootfs, whose etc/rc2.d is no makefile) and the staged .deb sources.
-include $(shell find $(BUILD)/obj $(A)/obj -name '*.d' -type f 2>/dev/null)
