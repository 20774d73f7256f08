/*
 * The parts of libfabric.so.1 that Rust cannot express:
 *
 * - the variadic entries fi_log and fi_param_define, which format their text here and
 *   hand it to the Rust side as one string;
 * - the symbols the C library exports in several versions (fi_getinfo, fi_freeinfo,
 *   fi_dupinfo, fi_fabric): each version is a small function here bound to its
 *   versioned name with `.symver` ("@@" = the default a newly linked program binds to,
 *   "@" = a hidden compat version kept for programs linked against an older library).
 *
 * The node names (FABRIC_1.0 ... FABRIC_1.6) are declared by libfabric.map, which the
 * link of libfabric.so.1 uses (scripts/build-capi.sh). This file includes no libfabric
 * header: the structures stay opaque here and are read on the Rust side.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct fi_info;
struct fi_fabric_attr;
struct fid_fabric;
struct fi_provider;

#define OFI_CAPI_EXPORT __attribute__((visibility("default")))
#define OFI_CAPI_SYMVER(local, versioned) __asm__(".symver " #local ", " versioned)

/* The Rust side (src/entry.rs). */
int ofi_capi_getinfo(uint32_t version, const char *node, const char *service,
		     uint64_t flags, const struct fi_info *hints, struct fi_info **info);
void ofi_capi_freeinfo(struct fi_info *info);
struct fi_info *ofi_capi_dupinfo(const struct fi_info *info);
int ofi_capi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
int ofi_capi_refuse_compat(const char *symbol);
void ofi_capi_log(const struct fi_provider *prov, int level, int subsys,
		  const char *func, int line, const char *msg);
int ofi_capi_param_define(const struct fi_provider *prov, const char *name, int type,
			  const char *help);

/* --- the current versions ------------------------------------------------------- */

OFI_CAPI_EXPORT int ofi_capi_getinfo_1_3(uint32_t version, const char *node,
					  const char *service, uint64_t flags,
					  const struct fi_info *hints, struct fi_info **info)
{
	return ofi_capi_getinfo(version, node, service, flags, hints, info);
}
OFI_CAPI_SYMVER(ofi_capi_getinfo_1_3, "fi_getinfo@@FABRIC_1.3");

OFI_CAPI_EXPORT void ofi_capi_freeinfo_1_3(struct fi_info *info)
{
	ofi_capi_freeinfo(info);
}
OFI_CAPI_SYMVER(ofi_capi_freeinfo_1_3, "fi_freeinfo@@FABRIC_1.3");

OFI_CAPI_EXPORT struct fi_info *ofi_capi_dupinfo_1_3(const struct fi_info *info)
{
	return ofi_capi_dupinfo(info);
}
OFI_CAPI_SYMVER(ofi_capi_dupinfo_1_3, "fi_dupinfo@@FABRIC_1.3");

OFI_CAPI_EXPORT int ofi_capi_fabric_1_1(struct fi_fabric_attr *attr,
					 struct fid_fabric **fabric, void *context)
{
	return ofi_capi_fabric(attr, fabric, context);
}
OFI_CAPI_SYMVER(ofi_capi_fabric_1_1, "fi_fabric@@FABRIC_1.1");

/* --- compat versions -------------------------------------------------------------
 * Programs linked against libfabric before 1.7 bind to these. Their fi_info lists had
 * older (shorter) attribute layouts, which this library does not produce: getinfo and
 * fabric refuse with -FI_ENOSYS (logged once, naming the symbol), dupinfo returns
 * NULL, freeinfo frees what this library allocated (a NULL list is a no-op). */

#define OFI_CAPI_OLD_GETINFO(tag, ver)                                               \
	OFI_CAPI_EXPORT int ofi_capi_getinfo_##tag(uint32_t version, const char *node, \
			const char *service, uint64_t flags,                           \
			const struct fi_info *hints, struct fi_info **info)            \
	{                                                                              \
		(void)version; (void)node; (void)service; (void)flags; (void)hints;    \
		if (info)                                                              \
			*info = NULL;                                                  \
		return ofi_capi_refuse_compat("fi_getinfo@" ver);                      \
	}                                                                              \
	OFI_CAPI_SYMVER(ofi_capi_getinfo_##tag, "fi_getinfo@" ver);                    \
	OFI_CAPI_EXPORT void ofi_capi_freeinfo_##tag(struct fi_info *info)             \
	{                                                                              \
		ofi_capi_freeinfo(info);                                               \
	}                                                                              \
	OFI_CAPI_SYMVER(ofi_capi_freeinfo_##tag, "fi_freeinfo@" ver);                  \
	OFI_CAPI_EXPORT struct fi_info *ofi_capi_dupinfo_##tag(const struct fi_info *info) \
	{                                                                              \
		(void)info;                                                            \
		(void)ofi_capi_refuse_compat("fi_dupinfo@" ver);                       \
		return NULL;                                                           \
	}                                                                              \
	OFI_CAPI_SYMVER(ofi_capi_dupinfo_##tag, "fi_dupinfo@" ver);

OFI_CAPI_OLD_GETINFO(1_0, "FABRIC_1.0")
OFI_CAPI_OLD_GETINFO(1_1, "FABRIC_1.1")
OFI_CAPI_OLD_GETINFO(1_2, "FABRIC_1.2")

OFI_CAPI_EXPORT int ofi_capi_fabric_1_0(struct fi_fabric_attr *attr,
					 struct fid_fabric **fabric, void *context)
{
	(void)attr; (void)context;
	if (fabric)
		*fabric = NULL;
	return ofi_capi_refuse_compat("fi_fabric@FABRIC_1.0");
}
OFI_CAPI_SYMVER(ofi_capi_fabric_1_0, "fi_fabric@FABRIC_1.0");

/* --- variadic entries -------------------------------------------------------------- */

/* Longer messages are cut at this many bytes (the C library's own limit is 1024). */
#define OFI_CAPI_TEXT_MAX 1024

OFI_CAPI_EXPORT void fi_log(const struct fi_provider *prov, int level, int subsys,
			    const char *func, int line, const char *fmt, ...)
{
	char text[OFI_CAPI_TEXT_MAX];
	va_list ap;

	if (!fmt)
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	ofi_capi_log(prov, level, subsys, func, line, text);
}

OFI_CAPI_EXPORT int fi_param_define(const struct fi_provider *prov, const char *name,
				    int type, const char *fmt, ...)
{
	char help[OFI_CAPI_TEXT_MAX];
	va_list ap;

	if (!fmt)
		return ofi_capi_param_define(prov, name, type, NULL);
	va_start(ap, fmt);
	vsnprintf(help, sizeof(help), fmt, ap);
	va_end(ap);
	return ofi_capi_param_define(prov, name, type, help);
}
