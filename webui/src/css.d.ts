// Stylesheets imported for esbuild to bundle (no exports).
declare module '*.css';
