#include "tensor_pickle.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <unordered_map>

namespace loom::torch_pickle {
namespace {

// The calls a dict of tensors needs; everything else is refused by name. All but the last are
// in PyTorch's weights_only allow-list (torch/_weights_only_unpickler.py); restore_type_tag is
// what LibTorch's pickle_save (and so Loom before issue 21) wrapped a typed dict in, and is
// read here as what it is for such a file: the dict itself.
enum class Callable { ordered_dict, rebuild_tensor, rebuild_parameter, storage_type, restore_type_tag };
constexpr int kCallableBits = 3;  // a storage type's name index sits above them in Value::number

constexpr const char* kStorageTypes[] = {"DoubleStorage", "FloatStorage", "HalfStorage", "BFloat16Storage",
                                         "LongStorage",   "IntStorage",   "ShortStorage", "CharStorage",
                                         "ByteStorage",   "BoolStorage"};

enum class Kind { none, boolean, integer, string, tuple, callable, storage, tensor, dict };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::none: return "None";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::string: return "str";
    case Kind::tuple: return "tuple";
    case Kind::callable: return "global";
    case Kind::storage: return "storage";
    case Kind::tensor: return "tensor";
    case Kind::dict: return "dict";
  }
  return "?";
}

// A value is a small handle: strings, tuples, dicts, storages and tensors live in the
// parser's arenas. Memo copies and nesting are therefore O(1) and nothing is ever freed
// recursively (a deep or cyclic structure cannot exhaust the stack).
struct Value {
  Kind kind = Kind::none;
  int64_t number = 0;  // boolean, integer; arena index for the others; Callable for callable
  int depth = 0;       // nesting of tuples and dicts
};

struct Storage {
  std::string type, key;
  int64_t numel = 0;
};

struct Dict {
  std::vector<std::pair<Value, Value>> items;
  int depth = 1;
};

class Parser {
 public:
  Parser(const unsigned char* data, size_t size, const PickleLimits& limits)
      : p_(data), end_(data + size), begin_(data), limits_(limits) {}

  std::vector<PickledTensor> run() {
    for (;;) {
      const size_t at = size_t(p_ - begin_);
      const unsigned char op = byte();
      if (op == '.') break;  // STOP
      step(op, at);
    }
    if (stack_.size() != 1 || !marks_.empty()) fail("the pickle ends with " + std::to_string(stack_.size()) + " values on its stack");
    return tensors_of(stack_.back());
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw PickleError(what); }

  void need(size_t n) const {
    if (size_t(end_ - p_) < n) fail("it ends in the middle of an opcode (at byte " + std::to_string(p_ - begin_) + ")");
  }
  unsigned char byte() {
    need(1);
    return *p_++;
  }
  uint64_t little(size_t n) {  // an unsigned little-endian field of n bytes
    need(n);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t(p_[i]) << (8 * i);
    p_ += n;
    return v;
  }
  std::string bytes(uint64_t n) {
    if (n > uint64_t(end_ - p_)) fail("a string of " + std::to_string(n) + " bytes runs past the end");
    std::string s(reinterpret_cast<const char*>(p_), size_t(n));
    p_ += n;
    return s;
  }
  std::string line() {  // GLOBAL's newline-terminated operands
    const void* nl = std::memchr(p_, '\n', size_t(std::min<ptrdiff_t>(end_ - p_, 256)));
    if (nl == nullptr && end_ - p_ < 256) need(size_t(end_ - p_) + 1);  // the file ends first
    if (nl == nullptr) fail("a GLOBAL name is not terminated within 256 bytes");
    std::string s(reinterpret_cast<const char*>(p_), size_t(static_cast<const unsigned char*>(nl) - p_));
    p_ = static_cast<const unsigned char*>(nl) + 1;
    return s;
  }

  void push(Value v) {
    if (stack_.size() >= limits_.max_stack) fail("more than " + std::to_string(limits_.max_stack) + " values on its stack");
    if (v.depth > limits_.max_depth) fail("values nested more than " + std::to_string(limits_.max_depth) + " deep");
    stack_.push_back(v);
  }
  Value pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("an opcode takes a value from an empty stack");
    const Value v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Value& top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("an opcode needs a value on an empty stack");
    return stack_.back();
  }
  std::vector<Value> pop_to_mark() {
    if (marks_.empty()) fail("a TUPLE or SETITEMS has no MARK");
    std::vector<Value> items(stack_.begin() + ptrdiff_t(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }

  Value string(std::string s) {
    strings_.push_back(std::move(s));
    return {Kind::string, int64_t(strings_.size() - 1), 0};
  }
  Value tuple(std::vector<Value> items) {
    int depth = 1;
    for (const Value& v : items) depth = std::max(depth, v.depth + 1);
    tuples_.push_back(std::move(items));
    return {Kind::tuple, int64_t(tuples_.size() - 1), depth};
  }
  Value new_dict() {
    dicts_.emplace_back();
    return {Kind::dict, int64_t(dicts_.size() - 1), 1};
  }
  const std::string& text(const Value& v, const char* what) const {
    if (v.kind != Kind::string) fail(std::string(what) + " is a " + kind_name(v.kind) + ", not a str");
    return strings_[size_t(v.number)];
  }
  int64_t integer(const Value& v, const char* what) const {
    if (v.kind != Kind::integer) fail(std::string(what) + " is a " + kind_name(v.kind) + ", not an int");
    return v.number;
  }
  const std::vector<Value>& items(const Value& v, const char* what) const {
    if (v.kind != Kind::tuple) fail(std::string(what) + " is a " + kind_name(v.kind) + ", not a tuple");
    return tuples_[size_t(v.number)];
  }
  void set_item(Value& dict, const Value& key, const Value& value) {
    if (dict.kind != Kind::dict) fail("SETITEM on a " + std::string(kind_name(dict.kind)) + ", not a dict");
    Dict& d = dicts_[size_t(dict.number)];
    d.items.emplace_back(key, value);
    d.depth = std::max({d.depth, key.depth + 1, value.depth + 1});
    if (d.depth > limits_.max_depth) fail("values nested more than " + std::to_string(limits_.max_depth) + " deep");
    dict.depth = d.depth;
  }

  void memo_put(uint64_t index) {
    if (memo_.size() >= limits_.max_memo && !memo_.count(index)) fail("more than " + std::to_string(limits_.max_memo) + " memo entries");
    memo_[index] = top();
  }
  void memo_get(uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail("it refers to memo entry " + std::to_string(index) + ", which was never stored");
    Value v = it->second;
    if (v.kind == Kind::dict) v.depth = dicts_[size_t(v.number)].depth;
    push(v);
  }

  Value global(const std::string& module, const std::string& name, size_t at) {
    if (module == "collections" && name == "OrderedDict") return {Kind::callable, int64_t(Callable::ordered_dict), 0};
    if (module == "torch._utils" && name == "_rebuild_tensor_v2") return {Kind::callable, int64_t(Callable::rebuild_tensor), 0};
    if (module == "torch._utils" && name == "_rebuild_parameter")
      return {Kind::callable, int64_t(Callable::rebuild_parameter), 0};
    if (module == "torch.jit._pickle" && name == "restore_type_tag")
      return {Kind::callable, int64_t(Callable::restore_type_tag), 0};
    if (module == "torch")
      for (const char* type : kStorageTypes)
        if (name == type) {
          Value v = string(name);
          v.kind = Kind::callable;  // a storage class: its name stays in the string arena
          v.number = int64_t(Callable::storage_type) | (v.number << kCallableBits);
          return v;
        }
    fail("byte " + std::to_string(at) + " loads " + module + "." + name +
         ", which a file of tensors never needs (only what torch.load(weights_only=True) accepts is read)");
  }
  static Callable callable_of(const Value& v) { return Callable(v.number & ((1 << kCallableBits) - 1)); }
  const std::string& storage_type_name(const Value& v) const { return strings_[size_t(v.number >> kCallableBits)]; }

  Value persistent_storage(const Value& id) {
    const std::vector<Value>& t = items(id, "a persistent id");
    if (t.size() != 5 || text(t[0], "a persistent id's tag") != "storage")
      fail("a persistent id is not ('storage', type, key, location, size)");
    if (t[1].kind != Kind::callable || callable_of(t[1]) != Callable::storage_type)
      fail("a persistent id names no storage type");
    Storage s;
    s.type = storage_type_name(t[1]);
    s.key = text(t[2], "a storage key");
    text(t[3], "a storage location");
    s.numel = integer(t[4], "a storage size");
    if (s.key.empty() || s.key.size() > 64 || s.key.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_") != std::string::npos)
      fail("a storage key is not a plain name");
    if (s.numel < 0) fail("storage " + s.key + " has a negative size");
    storages_.push_back(std::move(s));
    return {Kind::storage, int64_t(storages_.size() - 1), 0};
  }

  std::vector<int64_t> int_tuple(const Value& v, const char* what) const {
    const std::vector<Value>& t = items(v, what);
    if (t.size() > limits_.max_tensor_dims) fail(std::string(what) + " has more than " + std::to_string(limits_.max_tensor_dims) + " dimensions");
    std::vector<int64_t> out;
    for (const Value& x : t) out.push_back(integer(x, what));
    return out;
  }

  Value reduce(const Value& fn, const Value& args_value) {
    if (fn.kind != Kind::callable) fail("REDUCE calls a " + std::string(kind_name(fn.kind)));
    const std::vector<Value>& args = items(args_value, "REDUCE's arguments");
    switch (callable_of(fn)) {
      case Callable::ordered_dict:
        if (!args.empty()) fail("OrderedDict is called with arguments");
        return new_dict();
      case Callable::rebuild_tensor: {
        if (args.size() != 6 && args.size() != 7) fail("_rebuild_tensor_v2 takes 6 or 7 arguments, not " + std::to_string(args.size()));
        if (args[0].kind != Kind::storage) fail("_rebuild_tensor_v2's first argument is a " + std::string(kind_name(args[0].kind)));
        PickledTensor t;
        const Storage& s = storages_[size_t(args[0].number)];
        t.storage_type = s.type;
        t.storage_key = s.key;
        t.storage_numel = s.numel;
        t.offset = integer(args[1], "a tensor's storage offset");
        t.sizes = int_tuple(args[2], "a tensor's size");
        t.strides = int_tuple(args[3], "a tensor's stride");
        if (t.sizes.size() != t.strides.size()) fail("a tensor has " + std::to_string(t.sizes.size()) + " sizes but " + std::to_string(t.strides.size()) + " strides");
        if (args[4].kind != Kind::boolean) fail("_rebuild_tensor_v2's requires_grad is not a bool");
        tensors_.push_back(std::move(t));
        return {Kind::tensor, int64_t(tensors_.size() - 1), 0};
      }
      case Callable::rebuild_parameter:
        if (args.size() != 3 || args[0].kind != Kind::tensor) fail("_rebuild_parameter is not called with (tensor, bool, hooks)");
        return args[0];
      case Callable::restore_type_tag:
        if (args.size() != 2 || args[0].kind != Kind::dict || args[1].kind != Kind::string)
          fail("restore_type_tag is not called with (dict, type name)");
        return args[0];
      case Callable::storage_type: break;
    }
    fail("REDUCE calls a storage type");
  }

  void step(unsigned char op, size_t at) {
    switch (op) {
      case 0x80: {  // PROTO
        const unsigned char v = byte();
        if (v < 2 || v > 5) fail("pickle protocol " + std::to_string(v) + " (2 to 5 are read)");
        return;
      }
      case 0x95: little(8); return;  // FRAME: a length hint only
      case '(':  // MARK
        if (marks_.size() >= limits_.max_stack) fail("more than " + std::to_string(limits_.max_stack) + " open MARKs");
        marks_.push_back(stack_.size());
        return;
      case 'N': push({Kind::none, 0, 0}); return;
      case 0x88: push({Kind::boolean, 1, 0}); return;  // NEWTRUE
      case 0x89: push({Kind::boolean, 0, 0}); return;  // NEWFALSE
      case 'K': push({Kind::integer, int64_t(little(1)), 0}); return;  // BININT1
      case 'M': push({Kind::integer, int64_t(little(2)), 0}); return;  // BININT2
      case 'J': push({Kind::integer, int64_t(int32_t(uint32_t(little(4)))), 0}); return;  // BININT
      case 0x8a: {  // LONG1: little-endian two's complement of n bytes
        const size_t n = byte();
        if (n > 8) fail("an integer of " + std::to_string(n) + " bytes (at most 8 are read)");
        uint64_t v = little(n);
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t(0) << (8 * n);  // sign-extend
        push({Kind::integer, int64_t(v), 0});
        return;
      }
      case 'X': push(string(bytes(little(4)))); return;     // BINUNICODE
      case 0x8c: push(string(bytes(little(1)))); return;    // SHORT_BINUNICODE
      case 0x8d: push(string(bytes(little(8)))); return;    // BINUNICODE8
      case ')': push(tuple({})); return;                    // EMPTY_TUPLE
      case 0x85: case 0x86: case 0x87: {                    // TUPLE1, TUPLE2, TUPLE3
        std::vector<Value> t(size_t(op - 0x84));
        for (size_t i = t.size(); i-- > 0;) t[i] = pop();
        push(tuple(std::move(t)));
        return;
      }
      case 't': push(tuple(pop_to_mark())); return;         // TUPLE
      case '}': push(new_dict()); return;                   // EMPTY_DICT
      case 's': {                                           // SETITEM
        const Value value = pop(), key = pop();
        set_item(top(), key, value);
        return;
      }
      case 'u': {                                           // SETITEMS
        const std::vector<Value> kv = pop_to_mark();
        if (kv.size() % 2 != 0) fail("SETITEMS with an odd number of values");
        Value& dict = top();
        for (size_t i = 0; i < kv.size(); i += 2) set_item(dict, kv[i], kv[i + 1]);
        return;
      }
      case 'q': memo_put(little(1)); return;                // BINPUT
      case 'r': memo_put(little(4)); return;                // LONG_BINPUT
      case 0x94: memo_put(memo_.size()); return;            // MEMOIZE
      case 'h': memo_get(little(1)); return;                // BINGET
      case 'j': memo_get(little(4)); return;                // LONG_BINGET
      case 'c': {                                           // GLOBAL
        const std::string module = line();
        const std::string name = line();
        push(global(module, name, at));
        return;
      }
      case 0x93: {                                          // STACK_GLOBAL
        const Value name = pop(), module = pop();
        push(global(text(module, "STACK_GLOBAL's module"), text(name, "STACK_GLOBAL's name"), at));
        return;
      }
      case 'Q': push(persistent_storage(pop())); return;    // BINPERSID
      case 'R': {                                           // REDUCE
        const Value args = pop(), fn = pop();
        push(reduce(fn, args));
        return;
      }
      case 'b': {  // BUILD: state_dict()'s OrderedDict carries _metadata, which tensors do not need
        pop();
        if (top().kind != Kind::dict) fail("BUILD on a " + std::string(kind_name(top().kind)));
        return;
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail(std::string("opcode ") + hex + " at byte " + std::to_string(at) +
             " is not one a file of tensors uses (only what torch.load(weights_only=True) accepts is read)");
      }
    }
  }

  std::vector<PickledTensor> tensors_of(const Value& root) const {
    if (root.kind != Kind::dict) fail(std::string("it holds a ") + kind_name(root.kind) + ", not a dict of tensors");
    std::vector<PickledTensor> out;
    std::unordered_map<std::string, bool> seen;
    for (const auto& [key, value] : dicts_[size_t(root.number)].items) {
      if (key.kind != Kind::string) fail(std::string("a key of its dict is a ") + kind_name(key.kind) + ", not a str");
      const std::string& name = strings_[size_t(key.number)];
      if (value.kind != Kind::tensor) fail("entry '" + name.substr(0, 200) + "' is a " + kind_name(value.kind) + ", not a tensor");
      if (!seen.emplace(name, true).second) fail("entry '" + name.substr(0, 200) + "' appears twice");
      out.push_back(tensors_[size_t(value.number)]);
      out.back().name = name;
    }
    return out;
  }

  const unsigned char* p_;
  const unsigned char* const end_;
  const unsigned char* const begin_;
  const PickleLimits limits_;
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value> memo_;
  std::vector<std::string> strings_;
  std::vector<std::vector<Value>> tuples_;
  std::vector<Dict> dicts_;
  std::vector<Storage> storages_;
  std::vector<PickledTensor> tensors_;
};

}  // namespace

std::vector<PickledTensor> read_tensor_dict(const unsigned char* data, size_t size, const PickleLimits& limits) {
  return Parser(data, size, limits).run();
}

}  // namespace loom::torch_pickle
