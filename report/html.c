#include "html.h"

#include "../core/utf8.h"

void hq_html_put(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
        const int n = hq_utf8_len(p);
        if (n == 0 || (*p < 0x20 && *p != '\t' && *p != '\n')) {
            fputs("&#xfffd;", f); /* not text a UTF-8 page can hold: the replacement character */
            p++;
            continue;
        }
        switch (*p) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fwrite(p, 1, (size_t)n, f);
        }
        p += n;
    }
}

void hq_json_put(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
        const int n = hq_utf8_len(p);
        if (n == 0)
            fputs("\\ufffd", f); /* JSON is UTF-8: a byte that is not, the replacement character */
        else if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&')
            fprintf(f, "\\u%04x", *p);
        else
            fwrite(p, 1, (size_t)n, f);
        p += n ? n : 1;
    }
    fputc('"', f);
}

void hq_base64_put(FILE *f, const unsigned char *p, size_t n)
{
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        const unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
        fputc(A[v >> 18], f);
        fputc(A[(v >> 12) & 63], f);
        fputc(A[(v >> 6) & 63], f);
        fputc(A[v & 63], f);
    }
    if (i < n) {
        const unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0u);
        fputc(A[v >> 18], f);
        fputc(A[(v >> 12) & 63], f);
        fputc(i + 1 < n ? A[(v >> 6) & 63] : '=', f);
        fputc('=', f);
    }
}
