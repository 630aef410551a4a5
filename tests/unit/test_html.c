/* test_html.c — text written into the report page and JSON (report/html.h, core/utf8.h): markup
 * escaped, valid UTF-8 kept byte for byte, and bytes that are not UTF-8 (a Latin-1 file name, a
 * stray continuation byte, an overlong or surrogate sequence) written as U+FFFD, so that a page
 * and a JSON file that declare UTF-8 are. */
#define _DEFAULT_SOURCE /* open_memstream */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../core/utf8.h"
#include "../../report/html.h"

static char *written(void (*put)(FILE *, const char *), const char *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    put(f, s);
    fclose(f);
    return buf;
}

static void expect(void (*put)(FILE *, const char *), const char *s, const char *want)
{
    char *got = written(put, s);
    assert_string_equal(got, want);
    free(got);
}

static void utf8_lengths(void **state)
{
    (void)state;
    const struct {
        const char *s;
        int n;
    } cases[] = {
        {"a", 1},           {"\xc3\xa9", 2},     {"\xe2\x82\xac", 3}, {"\xf0\x9f\x98\x80", 4},
        {"\xe9", 0},        /* Latin-1 e-acute */ {"\x80", 0},          {"\xc0\xaf", 0}, /* overlong '/' */
        {"\xe0\x80\xaf", 0}, {"\xed\xa0\x80", 0}, /* a surrogate */      {"\xf4\x90\x80\x80", 0}, /* > U+10FFFF */
        {"\xc3", 0},         /* truncated at the end of the string */    {"\xe2\x82", 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        assert_int_equal(hq_utf8_len((const unsigned char *)cases[k].s), cases[k].n);
}

static void html_text(void **state)
{
    (void)state;
    expect(hq_html_put, "a<b>&\"'", "a&lt;b&gt;&amp;&quot;&#39;");
    expect(hq_html_put, "caf\xc3\xa9.png", "caf\xc3\xa9.png");
    expect(hq_html_put, "caf\xe9.png", "caf&#xfffd;.png");
    expect(hq_html_put, "a\x01\x1b[31m", "a&#xfffd;&#xfffd;[31m");
    expect(hq_html_put, NULL, "");
}

static void json_strings(void **state)
{
    (void)state;
    expect(hq_json_put, "a\"b\\c", "\"a\\\"b\\\\c\"");
    expect(hq_json_put, "</script>", "\"\\u003c/script\\u003e\"");
    expect(hq_json_put, "\xe2\x82\xac \xf0\x9f\x98\x80", "\"\xe2\x82\xac \xf0\x9f\x98\x80\"");
    expect(hq_json_put, "lat\xe9", "\"lat\\ufffd\"");
    expect(hq_json_put, "\xc3", "\"\\ufffd\"");
    expect(hq_json_put, "\x01", "\"\\u0001\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(utf8_lengths),
        cmocka_unit_test(html_text),
        cmocka_unit_test(json_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
