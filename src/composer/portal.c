/*
 * The portal (docs/composer.md, "Portal"): the page, script and style
 * under src/composer/ui/, built into stratad (scripts/embed_text.py) and
 * served by the composer's HTTP server at /ui. They hold no data: the
 * page asks the Redfish API for everything, with the token the user
 * gives it, so serving them needs no token.
 */
#include <string.h>

#include <microhttpd.h>

#include "composer/composer_int.h"

extern const char ui_index_html[], ui_app_js[], ui_style_css[];
extern const size_t ui_index_html_len, ui_app_js_len, ui_style_css_len;

static const struct {
	const char *path;
	const char *type;
	const char *data;
	const size_t *len;
} files[] = {
	{ "/ui", "text/html; charset=utf-8", ui_index_html, &ui_index_html_len },
	{ "/ui/index.html", "text/html; charset=utf-8", ui_index_html, &ui_index_html_len },
	{ "/ui/app.js", "text/javascript; charset=utf-8", ui_app_js, &ui_app_js_len },
	{ "/ui/style.css", "text/css; charset=utf-8", ui_style_css, &ui_style_css_len },
};

bool portal_is(const char *url)
{
	return strcmp(url, "/ui") == 0 || strncmp(url, "/ui/", 4) == 0;
}

int portal_serve(struct MHD_Connection *conn, const char *url, const char *method)
{
	static const char missing[] = "no such page in the portal: see /ui\n";
	static const char verb[] = "the portal's pages take GET and HEAD\n";
	char path[64];
	size_t len = strlen(url);
	const char *data = missing, *type = "text/plain; charset=utf-8";
	size_t dlen = sizeof(missing) - 1;
	unsigned status = MHD_HTTP_NOT_FOUND;
	struct MHD_Response *resp;
	enum MHD_Result ret;

	if (len < sizeof(path)) {
		memcpy(path, url, len + 1);
		if (len > 3 && path[len - 1] == '/')
			path[len - 1] = 0;	/* "/ui/" is "/ui" */
		for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
			if (strcmp(path, files[i].path) == 0) {
				data = files[i].data;
				dlen = *files[i].len;
				type = files[i].type;
				status = MHD_HTTP_OK;
			}
		}
	}
	if (status == MHD_HTTP_OK && strcmp(method, "GET") && strcmp(method, "HEAD")) {
		data = verb;
		dlen = sizeof(verb) - 1;
		type = "text/plain; charset=utf-8";
		status = MHD_HTTP_METHOD_NOT_ALLOWED;
	}
	resp = MHD_create_response_from_buffer(dlen, (void *)data, MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Content-Type", type);
	/* Only this server's own script and style; no framing; no sniffing. */
	MHD_add_response_header(resp, "Content-Security-Policy",
				"default-src 'self'; frame-ancestors 'none'; form-action 'self'");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, "Allow", "GET, HEAD");
	ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}
