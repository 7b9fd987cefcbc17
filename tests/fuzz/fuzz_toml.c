/*
 * libFuzzer target for the TOML parser and writer.  Any input must parse
 * or fail cleanly (the sanitizers catch the rest); an input that parses
 * must survive a round trip: written out by toml_write() and parsed again,
 * it must give an equal tree.  A failed round trip aborts, with the text
 * that did not read back on stderr.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/buf.h"
#include "runner/toml.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct toml_value	*first, *second;
	struct toml_error	 err;
	struct buf		 out;
	int			 rc;

	first = toml_parse((const char *)data, size, &err);
	if (first == NULL)
		return 0;

	buf_init(&out, BUF_UNLIMITED);
	if ((rc = toml_write(first, &out)) != 0) {
		fprintf(stderr, "toml_write failed: %d\n", rc);
		abort();
	}
	second = toml_parse(out.ptr, out.len, &err);
	if (second == NULL) {
		fprintf(stderr, "written text does not parse: %d:%d: %s\n"
		    "---\n%s---\n", err.line, err.column, err.msg, out.ptr);
		abort();
	}
	if (!toml_equal(first, second)) {
		fprintf(stderr, "round trip changed the tree\n---\n%s---\n",
		    out.ptr);
		abort();
	}
	toml_free(first);
	toml_free(second);
	buf_release(&out);
	return 0;
}
