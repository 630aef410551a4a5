/* html.h — writing text safely into the report page: HTML text and attributes, JSON strings (safe
 * inside a <script> element), base64 (data: URIs). Valid UTF-8 passes through, so names are shown
 * as the file system holds them; bytes that are not UTF-8 (a Latin-1 name), and control characters
 * in HTML text, become U+FFFD, so that the page and its JSON stay valid UTF-8. */
#ifndef HQ_HTML_H
#define HQ_HTML_H

#include <stddef.h>
#include <stdio.h>

/* s as HTML text or attribute value: & < > " ' escaped. NULL writes nothing. */
void hq_html_put(FILE *f, const char *s);

/* s as a JSON string, quotes included; < > & are written as \u escapes so that the JSON can sit
 * inside <script type="application/json"> without ending it. */
void hq_json_put(FILE *f, const char *s);

/* The bytes as base64 (RFC 4648, with padding). */
void hq_base64_put(FILE *f, const unsigned char *p, size_t n);

#endif
