#include "html.h"

void hq_html_put(FILE *f, const char *s)
{
    for (const char *p = s ? s : ""; *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*p, f);
        }
    }
}

void hq_json_put(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&')
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
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
