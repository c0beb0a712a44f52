/* orchestrator/yamltree: libyaml events folded into a positioned tree, and the tree written back.
 *
 * The event API is used (not libyaml's document loader) because the loader resolves aliases and
 * does not report duplicate keys; here an alias is an error at its position, so no input can
 * expand, and a duplicate key names both places. Input is checked for UTF-8 and control
 * characters before libyaml sees it, so those errors carry a line and column too. */
#include "orchestrator/yamltree.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static void errf(char *err, size_t errlen, const char *name, uint32_t line, uint32_t col,
		 const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void errf(char *err, size_t errlen, const char *name, uint32_t line, uint32_t col,
		 const char *fmt, ...)
{
	if (!err || !errlen)
		return;
	int n = snprintf(err, errlen, "%s:%u:%u: error: ", name, line, col);
	if (n < 0 || (size_t)n >= errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

const char *yamltree_kind_name(enum yamltree_kind kind)
{
	switch (kind) {
	case YAMLTREE_SCALAR: return "a scalar";
	case YAMLTREE_MAP: return "a mapping";
	case YAMLTREE_SEQ: return "a list";
	}
	return "?";
}

void yamltree_free(struct yamltree_node *node)
{
	if (!node)
		return;
	for (size_t i = 0; i < node->n; i++) {
		free(node->items[i].key);
		yamltree_free(node->items[i].value);
	}
	free(node->items);
	free(node->scalar);
	free(node->origin);
	free(node);
}

static struct yamltree_node *node_new(enum yamltree_kind kind, uint32_t line, uint32_t col)
{
	struct yamltree_node *n = calloc(1, sizeof *n);
	if (n) {
		n->kind = kind;
		n->line = line;
		n->col = col;
	}
	return n;
}

/* Append an entry; takes ownership of key and value on success. */
static int add_entry(struct yamltree_node *parent, char *key, uint32_t line, uint32_t col,
		     struct yamltree_node *value)
{
	if (parent->n == parent->cap) {
		size_t cap = parent->cap ? parent->cap * 2 : 4;
		struct yamltree_entry *it = realloc(parent->items, cap * sizeof *it);
		if (!it)
			return -ENOMEM;
		parent->items = it;
		parent->cap = cap;
	}
	parent->items[parent->n++] = (struct yamltree_entry){ key, line, col, value };
	return 0;
}

struct yamltree_node *yamltree_clone(const struct yamltree_node *src)
{
	if (!src)
		return NULL;
	struct yamltree_node *n = node_new(src->kind, src->line, src->col);
	if (!n)
		return NULL;
	n->plain = src->plain;
	if ((src->scalar && !(n->scalar = strdup(src->scalar))) ||
	    (src->origin && !(n->origin = strdup(src->origin))))
		goto fail;
	for (size_t i = 0; i < src->n; i++) {
		const struct yamltree_entry *e = &src->items[i];
		char *key = NULL;
		struct yamltree_node *v = yamltree_clone(e->value);
		if (!v || (e->key && !(key = strdup(e->key))) || add_entry(n, key, e->line, e->col, v)) {
			free(key);
			yamltree_free(v);
			goto fail;
		}
	}
	return n;
fail:
	yamltree_free(n);
	return NULL;
}

const struct yamltree_entry *yamltree_entry_of(const struct yamltree_node *map, const char *key)
{
	if (!map || map->kind != YAMLTREE_MAP)
		return NULL;
	for (size_t i = 0; i < map->n; i++)
		if (!strcmp(map->items[i].key, key))
			return &map->items[i];
	return NULL;
}

struct yamltree_node *yamltree_get(const struct yamltree_node *map, const char *key)
{
	const struct yamltree_entry *e = yamltree_entry_of(map, key);
	return e ? e->value : NULL;
}

bool yamltree_is_null(const struct yamltree_node *node)
{
	return node && node->kind == YAMLTREE_SCALAR && node->plain &&
	       (!node->scalar[0] || !strcmp(node->scalar, "~") || !strcmp(node->scalar, "null") ||
		!strcmp(node->scalar, "Null") || !strcmp(node->scalar, "NULL"));
}

int yamltree_set_origin(struct yamltree_node *node, const char *origin)
{
	char *o = strdup(origin);
	if (!o)
		return -ENOMEM;
	free(node->origin);
	node->origin = o;
	for (size_t i = 0; i < node->n; i++)
		if (yamltree_set_origin(node->items[i].value, origin))
			return -ENOMEM;
	return 0;
}

/* Check UTF-8 and control characters; on error fill line/col (1-based, in characters). */
static const char *check_text(const unsigned char *s, size_t len, uint32_t *line, uint32_t *col)
{
	uint32_t l = 1, c = 1;
	for (size_t i = 0; i < len;) {
		unsigned char b = s[i];
		size_t n;
		uint32_t cp;
		*line = l;
		*col = c;
		if (b < 0x80) {
			if (b == '\n') {
				l++;
				c = 1;
				i++;
				continue;
			}
			if ((b < 0x20 && b != '\t' && b != '\r') || b == 0x7f)
				return "control character in the text (expected printable UTF-8)";
			i++;
			c++;
			continue;
		}
		if (b >= 0xc2 && b <= 0xdf) {
			n = 2;
			cp = b & 0x1f;
		} else if (b >= 0xe0 && b <= 0xef) {
			n = 3;
			cp = b & 0x0f;
		} else if (b >= 0xf0 && b <= 0xf4) {
			n = 4;
			cp = b & 0x07;
		} else {
			return "invalid UTF-8 byte (expected UTF-8 text)";
		}
		if (i + n > len)
			return "truncated UTF-8 sequence (expected UTF-8 text)";
		for (size_t k = 1; k < n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return "invalid UTF-8 sequence (expected UTF-8 text)";
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return "invalid UTF-8 sequence (expected UTF-8 text)";
		/* the BOM at the very start is fine; U+FFFE/FFFF and C1 controls are not text */
		if ((cp >= 0x80 && cp <= 0x9f) || cp == 0xfffe || cp == 0xffff)
			return "control character in the text (expected printable UTF-8)";
		i += n;
		c++;
	}
	return NULL;
}

struct frame {
	struct yamltree_node *node;
	char *key;              /* mapping: the key waiting for its value */
	uint32_t key_line, key_col;
};

struct yamltree_node *yamltree_parse(const char *buf, size_t len, const char *name, bool want_map,
				     char *err, size_t errlen)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	struct frame stack[YAMLTREE_MAX_DEPTH + 1];
	int depth = 0, docs = 0;
	bool parser_ok = false, done = false, have_ev = false;
	struct yamltree_node *root = NULL;
	uint32_t line, col;
	const char *why;

	if (!name)
		name = "<input>";
	if (len > YAMLTREE_MAX_BYTES) {
		errf(err, errlen, name, 1, 1, "file is %zu bytes (limit YAMLTREE_MAX_BYTES is %u bytes)",
		     len, YAMLTREE_MAX_BYTES);
		return NULL;
	}
	if ((why = check_text((const unsigned char *)buf, len, &line, &col))) {
		errf(err, errlen, name, line, col, "%s", why);
		return NULL;
	}
	if (!yaml_parser_initialize(&parser)) {
		errf(err, errlen, name, 1, 1, "out of memory");
		return NULL;
	}
	parser_ok = true;
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);

	while (!done) {
		if (!yaml_parser_parse(&parser, &ev)) {
			yaml_mark_t m = parser.problem_mark;
			if (parser.error == YAML_READER_ERROR || parser.error == YAML_MEMORY_ERROR)
				m = (yaml_mark_t){ 0, 0, 0 };
			errf(err, errlen, name, (uint32_t)m.line + 1, (uint32_t)m.column + 1,
			     "YAML syntax: %s%s%s", parser.problem ? parser.problem : "error",
			     parser.context ? " " : "", parser.context ? parser.context : "");
			goto fail;
		}
		have_ev = true;
		line = (uint32_t)ev.start_mark.line + 1;
		col = (uint32_t)ev.start_mark.column + 1;
		struct yamltree_node *node = NULL;
		switch (ev.type) {
		case YAML_STREAM_START_EVENT:
		case YAML_DOCUMENT_END_EVENT:
			break;
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1) {
				errf(err, errlen, name, line, col,
				     "a second document (expected exactly one document)");
				goto fail;
			}
			break;
		case YAML_ALIAS_EVENT:
			errf(err, errlen, name, line, col,
			     "alias '*%s' (anchors and aliases are not supported; write the value out)",
			     (const char *)ev.data.alias.anchor);
			goto fail;
		case YAML_SCALAR_EVENT:
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT: {
			const yaml_char_t *anchor = ev.type == YAML_SCALAR_EVENT ? ev.data.scalar.anchor :
				ev.type == YAML_MAPPING_START_EVENT ? ev.data.mapping_start.anchor :
				ev.data.sequence_start.anchor;
			const yaml_char_t *tag = ev.type == YAML_SCALAR_EVENT ? ev.data.scalar.tag :
				ev.type == YAML_MAPPING_START_EVENT ? ev.data.mapping_start.tag :
				ev.data.sequence_start.tag;
			if (anchor) {
				errf(err, errlen, name, line, col,
				     "anchor '&%s' (anchors and aliases are not supported; write the value out)",
				     (const char *)anchor);
				goto fail;
			}
			if (tag && strcmp((const char *)tag, "!")) {
				errf(err, errlen, name, line, col, "tag '%s' (tags are not supported)",
				     (const char *)tag);
				goto fail;
			}
			struct frame *top = depth ? &stack[depth - 1] : NULL;
			if (ev.type == YAML_SCALAR_EVENT && top && top->node->kind == YAMLTREE_MAP && !top->key) {
				/* a key */
				const char *k = (const char *)ev.data.scalar.value;
				const struct yamltree_entry *dup = yamltree_entry_of(top->node, k);
				if (dup) {
					errf(err, errlen, name, line, col,
					     "duplicate key '%s' (first at line %u)", k, dup->line);
					goto fail;
				}
				if (!(top->key = strdup(k)))
					goto oom;
				top->key_line = line;
				top->key_col = col;
				break;
			}
			if (top && top->node->kind == YAMLTREE_MAP && !top->key) {
				errf(err, errlen, name, line, col,
				     "%s used as a key (expected a plain name)",
				     ev.type == YAML_MAPPING_START_EVENT ? "a mapping" : "a list");
				goto fail;
			}
			enum yamltree_kind kind = ev.type == YAML_SCALAR_EVENT ? YAMLTREE_SCALAR :
				ev.type == YAML_MAPPING_START_EVENT ? YAMLTREE_MAP : YAMLTREE_SEQ;
			if (!(node = node_new(kind, line, col)))
				goto oom;
			if (kind == YAMLTREE_SCALAR) {
				node->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
				if (!(node->scalar = strndup((const char *)ev.data.scalar.value,
							     ev.data.scalar.length))) {
					yamltree_free(node);
					goto oom;
				}
				if (strlen(node->scalar) != ev.data.scalar.length) {
					yamltree_free(node);
					errf(err, errlen, name, line, col,
					     "NUL character in a string (expected text)");
					goto fail;
				}
			}
			if (!top) {
				root = node;
			} else {
				int rc = add_entry(top->node, top->key, top->key_line, top->key_col, node);
				if (rc) {
					yamltree_free(node);
					goto oom;
				}
				top->key = NULL; /* owned by the entry now */
			}
			if (kind != YAMLTREE_SCALAR) {
				if (depth >= YAMLTREE_MAX_DEPTH) {
					errf(err, errlen, name, line, col,
					     "nested deeper than %d levels (limit YAMLTREE_MAX_DEPTH)",
					     YAMLTREE_MAX_DEPTH);
					goto fail;
				}
				stack[depth++] = (struct frame){ node, NULL, 0, 0 };
			}
			break;
		}
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			if (depth)
				depth--;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
		have_ev = false;
	}
	yaml_parser_delete(&parser);
	if (!root || yamltree_is_null(root)) {
		errf(err, errlen, name, 1, 1, "empty document (expected a mapping of scenario keys)");
		yamltree_free(root);
		return NULL;
	}
	if (want_map && root->kind != YAMLTREE_MAP) {
		errf(err, errlen, name, root->line, root->col, "top level is %s (expected a mapping of keys)",
		     yamltree_kind_name(root->kind));
		yamltree_free(root);
		return NULL;
	}
	return root;
oom:
	errf(err, errlen, name, line, col, "out of memory");
fail:
	for (int i = 0; i < depth; i++)
		free(stack[i].key);
	if (have_ev)
		yaml_event_delete(&ev);
	if (parser_ok)
		yaml_parser_delete(&parser);
	yamltree_free(root);
	return NULL;
}

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

int yamltree_set_path(struct yamltree_node *root, const char *path, struct yamltree_node *value,
		      uint32_t key_line, uint32_t key_col, const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	if (!root || root->kind != YAMLTREE_MAP) {
		*why = "the document is not a mapping";
		return -EINVAL;
	}
	if (!path || !*path || path[0] == '.' || path[strlen(path) - 1] == '.' || strstr(path, "..")) {
		*why = "malformed key path (expected e.g. network.default.delay)";
		return -EINVAL;
	}
	struct yamltree_node *cur = root;
	const char *p = path;
	for (;;) {
		const char *dot = strchr(p, '.');
		size_t seglen = dot ? (size_t)(dot - p) : strlen(p);
		char seg[128];
		if (seglen >= sizeof seg) {
			*why = "key path segment too long";
			return -EINVAL;
		}
		memcpy(seg, p, seglen);
		seg[seglen] = 0;
		struct yamltree_node **slot = NULL;
		if (cur->kind == YAMLTREE_SEQ) {
			if (!all_digits(seg)) {
				*why = "a list is indexed by number (e.g. network.links.0.delay)";
				return -EINVAL;
			}
			unsigned long idx = strtoul(seg, NULL, 10);
			if (idx >= cur->n) {
				*why = "list index out of range";
				return -EINVAL;
			}
			slot = &cur->items[idx].value;
		} else if (cur->kind == YAMLTREE_MAP) {
			for (size_t i = 0; i < cur->n; i++)
				if (!strcmp(cur->items[i].key, seg))
					slot = &cur->items[i].value;
			if (!slot) {
				/* a new key: a mapping on the way, the value at the end */
				struct yamltree_node *fresh = dot ? node_new(YAMLTREE_MAP, 0, 0) : NULL;
				char *k = strdup(seg);
				if (!k || (dot && !fresh) ||
				    add_entry(cur, k, key_line, key_col, dot ? fresh : value)) {
					free(k);
					yamltree_free(fresh);
					*why = "out of memory";
					return -ENOMEM;
				}
				if (fresh && value->origin && yamltree_set_origin(fresh, value->origin)) {
					*why = "out of memory";
					return -ENOMEM;
				}
				if (!dot)
					return 0;
				slot = &cur->items[cur->n - 1].value;
			}
		} else {
			*why = "a scalar value has no keys below it";
			return -EINVAL;
		}
		if (!dot) {
			yamltree_free(*slot);
			*slot = value;
			return 0;
		}
		if ((*slot)->kind == YAMLTREE_SCALAR && yamltree_is_null(*slot)) {
			/* `key:` with nothing: becomes a mapping */
			struct yamltree_node *m = node_new(YAMLTREE_MAP, (*slot)->line, (*slot)->col);
			if (m && (*slot)->origin && !(m->origin = strdup((*slot)->origin))) {
				free(m);
				m = NULL;
			}
			if (!m) {
				*why = "out of memory";
				return -ENOMEM;
			}
			yamltree_free(*slot);
			*slot = m;
		}
		cur = *slot;
		p = dot + 1;
	}
}

static void put(char *buf, size_t len, size_t *pos, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t len, size_t *pos, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	/* buf may be NULL (len 0) when the caller only measures: no offset is applied to it then. */
	int n = vsnprintf(*pos < len ? buf + *pos : NULL, *pos < len ? len - *pos : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*pos += (size_t)n;
}

static void flow(const struct yamltree_node *node, char *buf, size_t len, size_t *pos)
{
	if (node->kind == YAMLTREE_SCALAR) {
		put(buf, len, pos, "%s", node->scalar);
		return;
	}
	put(buf, len, pos, "%c", node->kind == YAMLTREE_SEQ ? '[' : '{');
	for (size_t i = 0; i < node->n; i++) {
		if (i)
			put(buf, len, pos, ",");
		if (node->kind == YAMLTREE_MAP)
			put(buf, len, pos, "%s:", node->items[i].key);
		flow(node->items[i].value, buf, len, pos);
	}
	put(buf, len, pos, "%c", node->kind == YAMLTREE_SEQ ? ']' : '}');
}

int yamltree_flow(const struct yamltree_node *node, char *buf, size_t len)
{
	size_t pos = 0;
	if (len)
		buf[0] = 0;
	flow(node, buf, len, &pos);
	return (int)pos;
}

static bool all_scalars(const struct yamltree_node *node)
{
	for (size_t i = 0; i < node->n; i++)
		if (node->items[i].value->kind != YAMLTREE_SCALAR)
			return false;
	return node->n <= 12;
}

static int emit_node(yaml_emitter_t *em, const struct yamltree_node *node, int depth)
{
	yaml_event_t ev;
	if (node->kind == YAMLTREE_SCALAR) {
		yaml_scalar_style_t style = node->plain ? YAML_ANY_SCALAR_STYLE : YAML_DOUBLE_QUOTED_SCALAR_STYLE;
		if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)node->scalar,
						  (int)strlen(node->scalar), 1, 1, style))
			return -ENOMEM;
		return yaml_emitter_emit(em, &ev) ? 0 : -EIO;
	}
	/* small all-scalar collections below the top level read best on one line */
	bool flow_style = depth > 0 && all_scalars(node);
	int ok = node->kind == YAMLTREE_MAP ?
		yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
						    flow_style ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE) :
		yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
						     flow_style ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE);
	if (!ok)
		return -ENOMEM;
	if (!yaml_emitter_emit(em, &ev))
		return -EIO;
	for (size_t i = 0; i < node->n; i++) {
		if (node->kind == YAMLTREE_MAP) {
			const char *k = node->items[i].key;
			if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)k, (int)strlen(k), 1, 1,
							  YAML_ANY_SCALAR_STYLE))
				return -ENOMEM;
			if (!yaml_emitter_emit(em, &ev))
				return -EIO;
		}
		int rc = emit_node(em, node->items[i].value, depth + 1);
		if (rc)
			return rc;
	}
	if (node->kind == YAMLTREE_MAP)
		yaml_mapping_end_event_initialize(&ev);
	else
		yaml_sequence_end_event_initialize(&ev);
	return yaml_emitter_emit(em, &ev) ? 0 : -EIO;
}

int yamltree_emit(const struct yamltree_node *root, FILE *out)
{
	yaml_emitter_t em;
	yaml_event_t ev;
	int rc = -EIO;
	if (!yaml_emitter_initialize(&em))
		return -ENOMEM;
	yaml_emitter_set_output_file(&em, out);
	yaml_emitter_set_unicode(&em, 1);
	yaml_emitter_set_width(&em, 100);
	yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
	if (!yaml_emitter_emit(&em, &ev))
		goto out;
	yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
	if (!yaml_emitter_emit(&em, &ev))
		goto out;
	if ((rc = emit_node(&em, root, 0)))
		goto out;
	rc = -EIO;
	yaml_document_end_event_initialize(&ev, 1);
	if (!yaml_emitter_emit(&em, &ev))
		goto out;
	yaml_stream_end_event_initialize(&ev);
	if (!yaml_emitter_emit(&em, &ev) || !yaml_emitter_flush(&em))
		goto out;
	rc = 0;
out:
	yaml_emitter_delete(&em);
	return rc;
}
