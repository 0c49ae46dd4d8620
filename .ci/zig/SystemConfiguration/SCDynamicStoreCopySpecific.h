/* A stand-in for the macOS SDK header, for type-checking only (.ci/zig/cc): the two declarations
 * libcurl's lib/macos.c uses. Nothing compiled with it is linked. */
typedef const void *CFDictionaryRef;
CFDictionaryRef SCDynamicStoreCopyProxies(const void *store);
void CFRelease(const void *cf);
