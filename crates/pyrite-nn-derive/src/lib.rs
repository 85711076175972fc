//! `#[derive(Module)]`: implements `pyrite::nn::ModuleFields` for a struct, so that the struct
//! is a module once it also implements `pyrite::nn::Module` (its `forward`).
//!
//! The generated code is plain: one call per field, in field order, to
//! `pyrite::nn::Members::visit_members` (a trait implemented for parameters, buffers, modules,
//! `Option`, `Vec` and `Arc` of them, and as a no-op for plain data such as numbers and
//! strings). One field must be the module's `ModuleBase` (PyTorch's `super().__init__()`).
//! `#[module(skip)]` leaves a field out; `#[module(name = "...")]` sets the type name shown by
//! `Display` (default: the struct's name).

use proc_macro::TokenStream;
use quote::quote;
use syn::{parse_macro_input, Data, DeriveInput, Fields, LitStr, Type};

#[proc_macro_derive(Module, attributes(module))]
pub fn derive_module(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// What `#[module(...)]` on a field or on the struct says.
#[derive(Default)]
struct Attrs {
    skip: bool,
    base: bool,
    name: Option<String>,
}

fn attrs(list: &[syn::Attribute]) -> syn::Result<Attrs> {
    let mut a = Attrs::default();
    for attr in list.iter().filter(|a| a.path().is_ident("module")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("skip") {
                a.skip = true;
            } else if meta.path.is_ident("base") {
                a.base = true;
            } else if meta.path.is_ident("name") {
                a.name = Some(meta.value()?.parse::<LitStr>()?.value());
            } else {
                return Err(meta.error("expected `skip`, `base` or `name = \"...\"`"));
            }
            Ok(())
        })?;
    }
    Ok(a)
}

fn is_module_base(ty: &Type) -> bool {
    match ty {
        Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "ModuleBase"),
        _ => false,
    }
}

fn expand(input: DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let ident = &input.ident;
    let top = attrs(&input.attrs)?;
    let type_name = top.name.unwrap_or_else(|| ident.to_string());
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(ident, "#[derive(Module)] works on structs"));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(syn::Error::new_spanned(ident, "#[derive(Module)] needs a struct with named fields"));
    };
    let mut base = None;
    let mut visits = Vec::new();
    let mut visits_mut = Vec::new();
    for f in &fields.named {
        let a = attrs(&f.attrs)?;
        let name = f.ident.as_ref().expect("named field");
        if a.base || (is_module_base(&f.ty) && base.is_none() && !a.skip) {
            if base.is_some() {
                return Err(syn::Error::new_spanned(name, "a module has one ModuleBase field"));
            }
            base = Some(name.clone());
        }
        if a.skip {
            continue;
        }
        let key = LitStr::new(&name.to_string(), name.span());
        visits.push(quote! { ::pyrite::nn::Members::visit_members(&self.#name, #key, f); });
        visits_mut.push(quote! { ::pyrite::nn::Members::visit_members_mut(&mut self.#name, #key, f)?; });
    }
    let Some(base) = base else {
        return Err(syn::Error::new_spanned(
            ident,
            "#[derive(Module)] needs a field of type `ModuleBase` (PyTorch's `super().__init__()`): add `base: ModuleBase` and build it with `ModuleBase::new()`",
        ));
    };
    let (impl_g, ty_g, where_g) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_g ::pyrite::nn::ModuleFields for #ident #ty_g #where_g {
            fn base(&self) -> &::pyrite::nn::ModuleBase { &self.#base }
            fn base_mut(&mut self) -> &mut ::pyrite::nn::ModuleBase { &mut self.#base }
            fn type_name(&self) -> &str { #type_name }
            fn visit_members<'a>(&'a self, f: &mut dyn FnMut(::pyrite::nn::Member<'a, '_>)) {
                #(#visits)*
            }
            fn visit_members_mut(
                &mut self,
                f: &mut dyn FnMut(::pyrite::nn::MemberMut<'_, '_>) -> ::pyrite::Result<()>,
            ) -> ::pyrite::Result<()> {
                #(#visits_mut)*
                Ok(())
            }
            fn as_module(&self) -> &dyn ::pyrite::nn::Module { self }
            fn as_any(&self) -> &dyn ::std::any::Any { self }
        }

        impl #impl_g ::std::fmt::Display for #ident #ty_g #where_g {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&::pyrite::nn::Module::repr(self))
            }
        }
    })
}
