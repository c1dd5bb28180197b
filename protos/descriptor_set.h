/* descriptor_set: the serialized FileDescriptorSet of every .proto the
 * server exposes (generated at build time; see protos/BUILD). Static data,
 * never freed. */
#ifndef MEMORYD_PROTOS_DESCRIPTOR_SET_H
#define MEMORYD_PROTOS_DESCRIPTOR_SET_H

extern const unsigned char memoryd_descriptor_set[];
extern const unsigned long memoryd_descriptor_set_len;

#endif
