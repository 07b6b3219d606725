// local_address.hpp: the address of this machine's interface that reaches another host, the one
// a rank's Gloo device listens on. On a cluster the ranks of another node connect to it, so it
// must be an address of this node (never the master's, which only node 0 has) on the network
// the master is reached through.
#pragma once

#include <string>

namespace loom {

// The local IPv4 or IPv6 address the kernel's routing table uses to reach `host` (a name or an
// address): a UDP socket "connected" there (no packet is sent) says which. A loopback `host`
// gives 127.0.0.1. Throws a runtime Failure naming `host` when it does not resolve or no route
// leads there.
std::string local_address_toward(const std::string& host);

// Whether `host` (a name or an address) names this machine: one of its addresses binds here.
// False when it does not resolve.
bool is_this_machine(const std::string& host);

// "vm7 (10.0.0.2)": this machine's host name and `address`, as failure lines name a node.
std::string describe_node(const std::string& address);

}  // namespace loom
