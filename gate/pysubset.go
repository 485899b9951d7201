package gate

import "strings"

// This file holds the allowlists that define the Python subset accepted by
// the optimizer gate. docs/GATES.md documents the same lists; a test keeps
// the two in step.

// pythonBuiltins is every public name of Python's builtins module (3.11 to
// 3.13). A submission may never bind one of these names, so a reference to
// one always means the builtin.
var pythonBuiltins = setOf(`
ArithmeticError AssertionError AttributeError BaseException BaseExceptionGroup
BlockingIOError BrokenPipeError BufferError BytesWarning ChildProcessError
ConnectionAbortedError ConnectionError ConnectionRefusedError ConnectionResetError
DeprecationWarning EOFError Ellipsis EncodingWarning EnvironmentError Exception
ExceptionGroup False FileExistsError FileNotFoundError FloatingPointError
FutureWarning GeneratorExit IOError ImportError ImportWarning IndentationError
IndexError InterruptedError IsADirectoryError KeyError KeyboardInterrupt
LookupError MemoryError ModuleNotFoundError NameError None NotADirectoryError
NotImplemented NotImplementedError OSError OverflowError PendingDeprecationWarning
PermissionError ProcessLookupError PythonFinalizationError RecursionError
ReferenceError ResourceWarning RuntimeError RuntimeWarning StopAsyncIteration
StopIteration SyntaxError SyntaxWarning SystemError SystemExit TabError
TimeoutError True TypeError UnboundLocalError UnicodeDecodeError
UnicodeEncodeError UnicodeError UnicodeTranslateError UnicodeWarning UserWarning
ValueError Warning ZeroDivisionError abs aiter all anext any ascii bin bool
breakpoint bytearray bytes callable chr classmethod compile complex copyright
credits delattr dict dir divmod enumerate eval exec exit filter float format
frozenset getattr globals hasattr hash help hex id input int isinstance
issubclass iter len license list locals map max memoryview min next object oct
open ord pow print property quit range repr reversed round set setattr slice
sorted staticmethod str sum super tuple type vars zip
`)

// allowedBuiltins are the builtins a submission may reference. getattr and
// hasattr are further restricted to direct calls with a literal attribute
// name; staticmethod only makes sense as a decorator but is harmless
// elsewhere.
var allowedBuiltins = setOf(`
abs all any bool callable chr complex dict divmod enumerate filter float
frozenset getattr hasattr int isinstance issubclass iter len list map max min
next ord pow range repr reversed round set slice sorted staticmethod str sum
super tuple zip
ArithmeticError AssertionError Exception IndexError KeyError LookupError
NotImplemented NotImplementedError OverflowError RuntimeError StopIteration
TypeError ValueError ZeroDivisionError
`)

// mathAttrs are the attributes of the math module a submission may use: all
// of its public functions and constants (math has no I/O and no state).
var mathAttrs = setOf(`
acos acosh asin asinh atan atan2 atanh cbrt ceil comb copysign cos cosh degrees
dist e erf erfc exp exp2 expm1 fabs factorial floor fma fmod frexp fsum gamma gcd
hypot inf isclose isfinite isinf isnan isqrt lcm ldexp lgamma log log10 log1p
log2 modf nan nextafter perm pi pow prod radians remainder sin sinh sqrt sumprod
tan tanh tau trunc ulp
`)

// torchAttrs are the attribute chains below torch a submission may use, as
// dotted paths without the leading "torch.". Every entry is a function, class,
// dtype or constant, never a module, so no module object can become a value
// in a submission. torch._foreach_* functions are allowed as a family (see
// torchAllowed).
var torchAttrs = setOf(`
Tensor Size Generator device dtype finfo iinfo
no_grad enable_grad is_grad_enabled get_default_dtype
is_tensor is_floating_point is_complex is_nonzero numel
float32 float64 float16 bfloat16 float double half
int8 int16 int32 int64 int long short uint8 bool complex64 complex128 cfloat cdouble
inf nan e pi contiguous_format preserve_format
tensor as_tensor scalar_tensor zeros zeros_like ones ones_like full full_like
eye arange linspace logspace
rand rand_like randn randn_like randint randint_like randperm bernoulli normal
abs absolute sqrt rsqrt square exp exp2 expm1 log log2 log10 log1p
sign sgn signbit neg negative reciprocal pow float_power
add sub subtract mul multiply div divide true_divide floor_divide fmod remainder
addcmul addcdiv lerp
clamp clip clamp_min clamp_max maximum minimum fmax fmin max min where
sin cos tan asin acos atan atan2 arctan2 sinh cosh tanh asinh acosh atanh
sigmoid erf erfc erfinv lgamma digamma logit xlogy
floor ceil round trunc frac copysign hypot nextafter
isfinite isnan isinf isposinf isneginf isclose allclose equal nan_to_num
eq ne gt ge lt le greater greater_equal less less_equal not_equal
logical_and logical_or logical_not logical_xor
sum nansum mean nanmean median prod std var std_mean var_mean norm
amax amin aminmax argmax argmin cumsum cumprod cummax cummin logsumexp logcumsumexp
count_nonzero all any topk kthvalue sort argsort msort
dot vdot inner outer ger matmul mm bmm mv addmm addmv addr baddbmm einsum
trace diag diag_embed diagonal diagflat tril triu kron cross dist cdist
cat concat concatenate stack hstack vstack dstack
reshape flatten unflatten transpose swapaxes swapdims movedim moveaxis permute
t squeeze unsqueeze chunk split tensor_split unbind narrow select index_select
masked_select gather take take_along_dim flip fliplr flipud roll rot90
broadcast_to broadcast_tensors broadcast_shapes atleast_1d atleast_2d atleast_3d
clone detach
optim.Optimizer optim.optimizer.Optimizer
linalg.norm linalg.vector_norm linalg.matrix_norm linalg.svd linalg.svdvals
linalg.qr linalg.eigh linalg.eigvalsh linalg.cholesky linalg.inv linalg.pinv
linalg.solve linalg.lstsq linalg.matrix_power linalg.det linalg.slogdet
linalg.cross linalg.multi_dot linalg.matrix_rank linalg.vecdot linalg.diagonal
`)

// torchClasses are the classes among the allowed torch names (canonical
// dotted paths). A class is never a value in a submission: it may only be
// called, be an operand of isinstance or issubclass, or appear in an
// annotation, so no alias of it can have attributes assigned.
var torchClasses = setOf(`
torch.Tensor torch.Size torch.Generator torch.device torch.dtype torch.finfo
torch.iinfo torch.no_grad torch.enable_grad torch.optim.Optimizer
torch.optim.optimizer.Optimizer
`)

// torchClass reports whether the canonical dotted path names a torch class.
func torchClass(path string) bool { return torchClasses[path] }

// torchForeachPrefix names the family of fused multi-tensor functions
// (torch._foreach_add_, torch._foreach_mul ...) that real optimizers use.
const torchForeachPrefix = "_foreach_"

// torchAllowed reports whether torch.<rest> may be used.
func torchAllowed(rest string) bool {
	if torchAttrs[rest] {
		return true
	}
	if name, ok := strings.CutPrefix(rest, torchForeachPrefix); ok {
		return name != "" && isLowerIdent(name)
	}
	return false
}

// deniedAttrs are attribute names refused on any object, because they reach
// files, shared memory, serialization, code objects, interpreter internals or
// another library's (numpy's) unrestricted API. Names starting with "_" are
// handled separately.
var deniedAttrs = setOf(`
numpy tofile tobytes from_file storage untyped_storage typed_storage share_memory_
from_numpy frombuffer from_dlpack to_dlpack
load loads save dump dumps format format_map mro
system popen spawn fork exec eval compile open fileno
os sys subprocess ctypes importlib builtins pickle threading multiprocessing signal
socket io inspect shutil pathlib hub jit ops classes library utils cpp_extension
load_inline distributed serialization
`)

// graphAttrs are the autograd graph and hook surfaces, refused on any object
// too: through them a tensor leads to the graph that produced it (grad_fn,
// next_functions, variable, saved_tensors, metadata) or code runs outside
// step() (backward, retain_grad, requires_grad_ with a hook). Every
// register_ method is refused by prefix (deniedAttrPrefixes).
var graphAttrs = setOf(`
grad_fn next_functions variable saved_tensors saved_variables metadata
backward retain_grad requires_grad_
`)

// uninitializedTorch are the torch functions that return uninitialized
// memory. Its contents are whatever the process freed before, including
// allocator bookkeeping that glibc randomizes per process, so they differ
// from one process to the next even without address-space randomization.
var uninitializedTorch = setOf(`torch.empty torch.empty_like torch.empty_strided`)

// uninitializedAttrs are the tensor methods that return or expose
// uninitialized memory (resize_ grows a tensor without filling it; set_()
// and new(size) make tensors over fresh storage).
var uninitializedAttrs = setOf(`new_empty new_empty_strided resize_ resize_as_ set_ new`)

// processAttrs differ from one process to the next whatever the inputs: an
// address as a number (data_ptr) and a generator seeded from the operating
// system's entropy (seed). Training must be a function of its inputs.
var processAttrs = setOf(`data_ptr seed`)

// deniedAttrPrefixes are prefixes of attribute names refused on any object:
// the frame, code, traceback and generator internals from which the
// interpreter's globals and builtins can be reached without a dunder, and
// register_, the prefix of every hook registration (register_hook,
// register_prehook, register_forward_hook, register_step_pre_hook …).
var deniedAttrPrefixes = []string{"gi_", "cr_", "ag_", "f_", "tb_", "co_", "func_", "im_", "register_"}

// allowedDunderMethods are the dunder method names a class may define, and the
// dunder attributes that may be read on super().
var allowedDunderMethods = setOf(`__init__ __setstate__`)

// setOf builds a set from whitespace-separated words.
func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// isDunder reports whether name has the form __x__.
func isDunder(name string) bool {
	return len(name) > 4 && strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__")
}

// isLowerIdent reports whether s is made of lower-case ASCII letters, digits
// and underscores.
func isLowerIdent(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// isASCIIIdent reports whether s is a non-empty ASCII Python identifier.
func isASCIIIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// attrDenied reports why an attribute name is refused on any object, or ""
// when it is not.
func attrDenied(name string) string {
	if graphAttrs[name] || strings.HasPrefix(name, "register_") {
		return "it reaches the autograd graph or a hook; an update rule sees only its tensors and their gradients"
	}
	if processAttrs[name] {
		return "it differs from one process to the next; training must be a function of its inputs"
	}
	if deniedAttrs[name] {
		return "it reaches files, code, serialization or the interpreter"
	}
	for _, p := range deniedAttrPrefixes {
		if strings.HasPrefix(name, p) {
			return "it reaches the interpreter's frames or code"
		}
	}
	return ""
}
