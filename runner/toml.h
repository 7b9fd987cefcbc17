/*
 * TOML 1.0.0: a parser into a value tree, the tree's accessors and
 * mutators, and a writer (toml_write.c) that turns a tree back into TOML.
 *
 * Input is bytes with an explicit length; keys and strings may contain NUL,
 * so they are (ptr, len) pairs, and ptr[len] is always NUL for convenience.
 * Tables keep their keys in the order they were defined, so a document
 * that is read and written back keeps its shape.
 *
 * Ownership: the tree returned by toml_parse() belongs to the caller and is
 * freed with toml_free(root).  Every value is owned by the one array or
 * table that holds it.  Setters take ownership of the value passed in.
 */
#ifndef RUNNER_TOML_H
#define RUNNER_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf;

enum toml_type {
	TOML_STRING,
	TOML_INTEGER,
	TOML_FLOAT,
	TOML_BOOL,
	TOML_DATETIME,		/* offset date-time: 1979-05-27T07:32:00Z */
	TOML_DATETIME_LOCAL,	/* 1979-05-27T07:32:00 */
	TOML_DATE_LOCAL,	/* 1979-05-27 */
	TOML_TIME_LOCAL,	/* 07:32:00 */
	TOML_ARRAY,
	TOML_TABLE,
};

/* How a table came to exist; the writer uses it to choose its syntax. */
enum toml_table_kind {
	TOML_TABLE_IMPLICIT,	/* only as a prefix of a header: [a.b] makes a */
	TOML_TABLE_HEADER,	/* [a] or an element of [[a]] */
	TOML_TABLE_DOTTED,	/* made by a dotted key: a.b = 1 makes a */
	TOML_TABLE_INLINE,	/* { ... } */
};

struct toml_datetime {
	int	year, month, day;	/* DATETIME, DATETIME_LOCAL, DATE_LOCAL */
	int	hour, minute, second;	/* DATETIME, DATETIME_LOCAL, TIME_LOCAL */
	int	nanosecond;		/* 0 .. 999999999 (first 9 digits) */
	int	frac_digits;		/* fraction digits as written (may exceed 9), 0 = none */
	int	offset_minutes;		/* DATETIME: east of UTC */
	bool	offset_z;		/* DATETIME: written as Z (offset 0) */
};

struct toml_string {
	char	*ptr;			/* ptr[len] == '\0' */
	size_t	 len;
};

struct toml_value;

struct toml_kv {
	struct toml_string	 key;
	struct toml_value	*value;
};

struct toml_value {
	enum toml_type	type;
	int		line;		/* where it was defined, 1-based; 0 if built */
	int		column;
	union {
		struct toml_string	s;
		int64_t			i;
		double			f;
		bool			b;
		struct toml_datetime	dt;
		struct {
			struct toml_value	**items;
			size_t			  len;
			size_t			  cap;
			bool			  of_tables; /* made by [[...]] */
		} array;
		struct {
			struct toml_kv		 *items;
			size_t			  len;
			size_t			  cap;
			enum toml_table_kind	  kind;
			void			 *index; /* private lookup index */
		} table;
	} u;
};

struct toml_error {
	int	line;			/* 1-based */
	int	column;			/* 1-based, in characters */
	char	msg[256];		/* what was wrong, e.g. expected '=' after key "x" */
};

/*
 * Parse a whole document.  Returns the root table, or NULL with *err
 * describing the first problem.  A UTF-8 BOM at the start is skipped; one
 * anywhere else in the syntax is an error (inside strings and comments
 * U+FEFF is a character like any other).  Nesting of tables, arrays and
 * keys is capped at 512 levels, so no walk of a tree can exhaust the stack.
 */
struct toml_value	*toml_parse(const char *data, size_t len, struct toml_error *err);
void			 toml_free(struct toml_value *v);

/* Lookup in a table; NULL when absent or when t is not a table. */
struct toml_value	*toml_get(const struct toml_value *t, const char *key);
struct toml_value	*toml_getn(const struct toml_value *t, const char *key, size_t keylen);

/* Constructors (line and column 0). */
struct toml_value	*toml_new_string(const char *s, size_t len);
struct toml_value	*toml_new_integer(int64_t i);
struct toml_value	*toml_new_float(double f);
struct toml_value	*toml_new_bool(bool b);
struct toml_value	*toml_new_datetime(enum toml_type type, const struct toml_datetime *dt);
struct toml_value	*toml_new_array(void);
struct toml_value	*toml_new_table(enum toml_table_kind kind);
/* Deep copy. */
struct toml_value	*toml_clone(const struct toml_value *v);

/*
 * Set key in table t to v, taking ownership of v (also when t is not a
 * table: v is then freed).  An existing value of
 * that key is freed and replaced in place (its position is kept); a new key
 * is appended.
 */
void	toml_table_set(struct toml_value *t, const char *key, size_t keylen,
	    struct toml_value *v);
/* Remove and free key; 0 if it was there, -1 if not. */
int	toml_table_remove(struct toml_value *t, const char *key, size_t keylen);
/* Append v to array a, taking ownership. */
void	toml_array_push(struct toml_value *a, struct toml_value *v);
/* Remove and free element i. */
void	toml_array_remove(struct toml_value *a, size_t i);

/* Deep equality (floats by value, NaN equal to NaN; datetimes by value). */
bool	toml_equal(const struct toml_value *a, const struct toml_value *b);

const char *toml_type_name(enum toml_type type);

/*
 * Write root (a table) as a TOML document into out.  Re-parsing the output
 * gives a tree equal to root.  Sub-tables are indented two spaces per level
 * below the first, as gitlab-runner writes config.toml.  Returns 0, or
 * -ENOSPC if out's cap was reached.
 */
int	toml_write(const struct toml_value *root, struct buf *out);

#endif
