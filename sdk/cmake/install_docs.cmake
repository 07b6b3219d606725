# install_docs.cmake: installs the plugin author's guide with the ABI reference it links to,
# side by side in <prefix>/share/loom, so that every link in the installed docs resolves
# (tests/sdk_install checks it). Run by `cmake --install` (sdk/CMakeLists.txt); LOOM_DOC_SOURCE
# is the source tree.
set(dest "${CMAKE_INSTALL_PREFIX}/share/loom")
file(MAKE_DIRECTORY "${dest}")

# sdk/README.md links ../docs/abi.md in the source tree; installed, abi.md sits beside it.
file(READ "${LOOM_DOC_SOURCE}/sdk/README.md" guide)
string(REPLACE "](../docs/abi.md)" "](abi.md)" guide "${guide}")
file(WRITE "${dest}/README.md" "${guide}")

# docs/abi.md links design.md, which is not installed: name it as text instead.
file(READ "${LOOM_DOC_SOURCE}/docs/abi.md" abi)
string(REPLACE "[design.md](design.md)" "docs/design.md in the Loom source tree" abi "${abi}")
file(WRITE "${dest}/abi.md" "${abi}")
message(STATUS "Installing: ${dest}/README.md, ${dest}/abi.md")
